"""`tuner bench`: ratios of what the engine achieves to what this machine allows, section by
section (tuner.bench.sections)."""

from __future__ import annotations

import argparse
import os
import sys

from tuner.bench.sections import DEFAULT, SECTIONS, SITES_FRACS, Options, chosen, markdown
from tuner.commands.args import add_knob_flags, engine_settings, print_json, progress
from tuner.errors import CommandError, Exit

DEFAULTS = Options()
BUSY = 0.5  # a load average above this share of the cores makes timings noisy


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
        return Exit.OK
    sections = chosen(args.only.split(","))
    for flag, value in (("--tokens", args.tokens), ("--rounds", args.rounds)):
        if value is not None and value < 1:
            raise CommandError(f"{flag} must be >= 1, got {value}")
    if not args.scale > 0:
        raise CommandError(f"--scale must be > 0, got {args.scale}")
    settings = engine_settings(args)  # checked before torch loads
    from tuner.bench.limits import describe, describe_text
    from tuner.settings import to_config

    cfg = to_config(settings)
    opts = Options(tokens=args.tokens, fracs=args.fracs, scale=args.scale, rounds=args.rounds)
    out = {"machine": describe(cfg), "load": {"before": machine_load()}}
    if busy := busy_note(out["load"]["before"]):
        print(f"tuner bench: warning: {busy}", file=sys.stderr)
    done = []
    try:
        for i, section in enumerate(sections, 1):
            with progress(f"{section.name} ({i} of {len(sections)})", counted=False):
                out[section.name] = section.measure(cfg, opts)
            done.append(section)
    except KeyboardInterrupt:  # the sections measured are reported
        print(f"tuner bench: interrupted in {sections[len(done)].name}; the sections "
              f"measured before it: {', '.join(s.name for s in done) or 'none'}",
              file=sys.stderr)
    out["load"]["after"] = machine_load()
    if args.json:
        print_json(out)
    else:
        print(describe_text(out["machine"]))
        for section in done:
            print(section.text(out[section.name]))
    return Exit.OK if len(done) == len(sections) else Exit.INTERRUPTED


def machine_load() -> dict:
    """The load averages over 1, 5 and 15 minutes, and the cores they share."""
    one, five, fifteen = os.getloadavg()
    return {"1min": round(one, 2), "5min": round(five, 2), "15min": round(fifteen, 2),
            "cores": os.cpu_count() or 1}


def busy_note(load: dict) -> str | None:
    """Why timings measured now would be noisy: other work keeps more than half the cores
    busy (the load average of the last minute)."""
    if load["1min"] <= BUSY * load["cores"]:
        return None
    return (f"the machine is busy (load average {load['1min']} over the last minute on "
            f"{load['cores']} cores): other work takes the time being measured, so the "
            "figures will be noisy; measure on a quiet machine")
