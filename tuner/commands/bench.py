"""`tuner bench`: ratios of what the engine achieves to what this machine allows, section by
section (tuner.bench.sections)."""

from __future__ import annotations

import argparse

from tuner.bench.sections import DEFAULT, SECTIONS, SITES_FRACS, Options, chosen, markdown
from tuner.commands.args import add_knob_flags, engine_settings, print_json


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", default=",".join(DEFAULT),
                   help=f"comma-separated sections (default {','.join(DEFAULT)}): " + "; ".join(
                       f"{s.name}: {s.what}" for s in SECTIONS).replace("%", "%%"))
    p.add_argument("--list", action="store_true",
                   help="print the sections as a Markdown table (the README's) and exit")
    p.add_argument("--tokens", type=int,
                   help="tokens per measurement (default 64; for ui, 160 a phase)")
    p.add_argument("--fracs", default=",".join(f"{f:g}" for f in SITES_FRACS),
                   help="pcie_frac values of the sites sweep")
    p.add_argument("--scale", type=float, default=0.1,
                   help="multiplies the emulated link and CPU bandwidths of the sites sweep")
    p.add_argument("--rounds", type=int, default=4,
                   help="rounds of no UI / embedded / connected phases of the ui section "
                        "(default 4)")
    p.add_argument("--json", action="store_true")
    add_knob_flags(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.list:
        print(markdown(), end="")
        return 0
    from tuner.bench.limits import describe, describe_text
    from tuner.settings import to_config

    try:
        sections = chosen(args.only.split(","))
    except ValueError as err:
        raise SystemExit(f"tuner bench: {err}") from None
    for flag, value in (("--tokens", args.tokens), ("--rounds", args.rounds)):
        if value is not None and value < 1:
            raise SystemExit(f"tuner bench: {flag} must be >= 1, got {value}")
    cfg = to_config(engine_settings(args))
    opts = Options(tokens=args.tokens, fracs=tuple(float(f) for f in args.fracs.split(",")),
                   scale=args.scale, rounds=args.rounds)
    out = {"machine": describe(cfg)}
    for section in sections:
        out[section.name] = section.measure(cfg, opts)
    if args.json:
        print_json(out)
        return 0
    print(describe_text(out["machine"]))
    for section in sections:
        print(section.text(out[section.name]))
    return 0
