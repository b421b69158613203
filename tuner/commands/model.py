"""`tuner model make|stats`: write the demo model; measure its routing through the engine."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from tuner.cli import add_knob_flags, engine_settings, print_json
from tuner.engine import synth
from tuner.engine.session import Session
from tuner.engine.stats import routing_stats
from tuner.format import figure
from tuner.settings import to_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="make the demo model or measure a model's routing")
    msub = p.add_subparsers(dest="model_command", required=True)
    make = msub.add_parser("make", help="write the deterministic demo model (no download)")
    which = make.add_mutually_exclusive_group()
    which.add_argument("--tiny", action="store_true", help="the tiny test model instead")
    which.add_argument("--deep", action="store_true",
                       help="a 64-layer model of small experts instead (for the UI benchmark)")
    make.add_argument("--out", type=Path, help="folder (default: the model cache)")
    make.add_argument("--force", action="store_true", help="replace an existing folder")
    make.set_defaults(func=_make)
    stats = msub.add_parser("stats", help="routing skew and predictor overlaps, measured")
    stats.add_argument("--tokens", type=int, default=512)
    stats.add_argument("--json", action="store_true")
    add_knob_flags(stats)
    stats.set_defaults(func=_stats)


def _make(args: argparse.Namespace) -> int:
    recipe = synth.TINY if args.tiny else synth.DEEP if args.deep else synth.DEFAULT
    out = args.out or synth.default_model_path(recipe)
    if out.exists() and args.force:
        shutil.rmtree(out)
    if out.exists():
        print(f"{out} already exists (use --force to make it again)")
        return 0
    synth.write(recipe, out)
    print(f"wrote {recipe.name} to {out}")
    return 0


def _stats(args: argparse.Namespace) -> int:
    session = Session(to_config(engine_settings(args)))
    try:
        session.run(args.tokens)
        stats = routing_stats(session)
    finally:
        session.engine.close()
    if args.json:
        print_json(stats)
        return 0
    t = stats["totals"]
    print(f"{stats['model']}: {stats['tokens']} tokens; slot overlap (whole routings) - "
          f"stale-gate {t['stale_pct']} % ({t['stale_whole_pct']} %), prev-token "
          f"{t['prev_pct']} % ({t['prev_whole_pct']} %), fresh-gate control {t['ctrl_pct']} % "
          f"({t['ctrl_whole_pct']} %); top-10 % experts take {t['top10_share']} % of routings")
    print(f"{'layer':>5} {'stale':>6} {'prev':>6} {'ctrl':>6} {'routings':>9} "
          f"{'top10%':>7} {'max/mean':>9}")
    for r in stats["layers"]:
        print(f"{r['layer']:>5} {figure(r['stale_pct'], '%'):>6} {figure(r['prev_pct'], '%'):>6} "
              f"{figure(r['ctrl_pct'], '%'):>6} {r['routings']:>9} {r['top10_share']:>7.1f} "
              f"{r['max_over_mean']:>9.2f}")
    return 0
