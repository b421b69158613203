"""`tuner knobs`: the knob table, as text, JSON or the docs' Markdown table."""

from __future__ import annotations

import argparse

from tuner.commands.args import print_json
from tuner.knobs import ALIASES, KNOBS, written

HEADER = ("group", "knob", "env", "default", "allowed", "unit", "class", "tune searches",
          "what it does")


def rows() -> list[tuple[str, ...]]:
    """One row per knob, the columns of HEADER."""
    return [(k.group, k.name, k.env, repr(int(k.default) if k.type is bool else written(k.default)),
             k.allowed(), k.unit or "-", "restart" if k.restart else "live",
             _searched(k), k.help)
            for k in KNOBS]


def _searched(k) -> str:
    from tuner.tune.space import default_dimension

    if not k.search:
        return "-"
    return default_dimension(k).describe() + (" (lossy: with a gate)" if k.lossy else "")


def markdown() -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for group, name, env, default, allowed, unit, cls, search, help_ in rows():
        # a | inside a table cell ends the cell unless escaped, even in code
        if search != "-":
            code, _, note = search.partition(" ")
            search = f"`{code}`".replace("|", "\\|") + (f" {note}" if note else "")
        lines.append(f"| {group} | `{name}` | `{env}` | `{default}` | {allowed} | {unit} | "
                     f"{cls} | {search} | {help_} |")
    lines += ["", "Older names still read in presets, the environment, flags and changes (and "
                  "never written):", ""]
    lines += [f"* `{a.old.name}` (`{a.old.env}`): {a.old.help}" for a in ALIASES]
    return "\n".join(lines) + "\n"


def text() -> str:
    """Aligned columns under a header; the help runs on to the end of the line."""
    table = [HEADER, *rows()]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1]
                     for r in table) + "\n"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")
    p.add_argument("--markdown", action="store_true", help="the docs' table")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.json:
        print_json([k.as_dict() for k in KNOBS])
    elif args.markdown:
        print(markdown(), end="")
    else:
        print(text(), end="")
    return 0
