"""`tuner knobs`: the knob table, as text, JSON or the README's Markdown table."""

from __future__ import annotations

import argparse

from tuner.cli import print_json
from tuner.knobs import KNOBS


def markdown() -> str:
    rows = ["| group | knob | env | default | allowed | unit | class | what it does |",
            "|---|---|---|---|---|---|---|---|"]
    for k in KNOBS:
        default = int(k.default) if k.type is bool else k.default
        rows.append(f"| {k.group} | `{k.name}` | `{k.env}` | `{default!r}` | {k.allowed()} | "
                    f"{k.unit or '-'} | {'restart' if k.restart else 'live'} | {k.help} |")
    return "\n".join(rows) + "\n"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("knobs", help="list every knob")
    p.add_argument("--json", action="store_true")
    p.add_argument("--markdown", action="store_true", help="the README's table")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.json:
        print_json([k.as_dict() for k in KNOBS])
    elif args.markdown:
        print(markdown(), end="")
    else:
        for k in KNOBS:
            print(f"{k.env:32} {k.name:20} {k.default!r:8} {k.allowed():28} {k.help}")
    return 0
