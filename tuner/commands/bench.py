"""`tuner bench`: ratios of what the engine achieves to what this machine allows, section by
section (tuner.bench.sections)."""

from __future__ import annotations

import argparse

from tuner.bench.sections import DEFAULT, SECTIONS, SITES_FRACS, Options, chosen, markdown
from tuner.commands.args import add_knob_flags, engine_settings, print_json

DEFAULTS = Options()


def shares(text: str) -> tuple[float, ...]:
    """--fracs: comma-separated shares in [0, 1]."""
    try:
        values = tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        values = ()
    if not values or not all(0 <= v <= 1 for v in values):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated shares in [0, 1] like 0,0.25,1, got {text!r}")
    return values


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", default=",".join(DEFAULT),
                   help=f"comma-separated sections (default {','.join(DEFAULT)}): " + "; ".join(
                       f"{s.name}: {s.what}" for s in SECTIONS).replace("%", "%%"))
    p.add_argument("--list", action="store_true",
                   help="print the sections as a Markdown table (the docs') and exit")
    p.add_argument("--tokens", type=int,
                   help="tokens per measurement (default 64; for ui, 160 a phase)")
    p.add_argument("--fracs", type=shares, default=SITES_FRACS, metavar="F,F,...",
                   help="pcie_frac values of the sites sweep, each in [0, 1] (default "
                        f"{','.join(f'{f:g}' for f in SITES_FRACS)})")
    p.add_argument("--scale", type=float, default=DEFAULTS.scale,
                   help="multiplies the emulated link and CPU bandwidths of the sites sweep "
                        f"(> 0; default {DEFAULTS.scale:g})")
    p.add_argument("--rounds", type=int, default=DEFAULTS.rounds,
                   help="rounds of no UI / embedded / connected phases of the ui section "
                        f"(default {DEFAULTS.rounds})")
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
    if not args.scale > 0:
        raise SystemExit(f"tuner bench: --scale must be > 0, got {args.scale}")
    cfg = to_config(engine_settings(args))
    opts = Options(tokens=args.tokens, fracs=args.fracs, scale=args.scale, rounds=args.rounds)
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
