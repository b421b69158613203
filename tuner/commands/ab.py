"""`tuner ab A B`: interleaved A/B runs ending with a sentinel run of A, and a verdict."""

from __future__ import annotations

import argparse
import sys

from tuner.cli import INTERRUPTED, add_knob_flags, engine_settings, print_json
from tuner.engine.workload import NAMES, WorkloadError
from tuner.format import figure
from tuner.measure.report import knob_change, result_lines
from tuner.measure.rules import RULESETS, check_limits


def register(p: argparse.ArgumentParser) -> None:
    for arm in ("a", "b"):
        p.add_argument(arm, metavar=arm.upper(), help=f"arm {arm.upper()}: a preset name, a "
                       ".toml file, or knob=value pairs like moce_bonus=0.85,cache_policy=2q")
    p.add_argument("--pairs", type=int, default=4, help="A B pairs before the sentinel A "
                   "(default 4)")
    p.add_argument("--tokens", type=int, default=128, help="tokens per run (default 128)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured runs of A first, so the "
                   "page cache and lazy initialisation do not land on the first pair "
                   "(default 1)")
    p.add_argument("--workloads", help="comma-separated workloads (built-in names or "
                   f"JSON-lines files) to run the matched pairs on, each in turn; built-in: "
                   f"{', '.join(NAMES)} (default: the workload knob's)")
    p.add_argument("--rules", default="", choices=["", *RULESETS], help="rule set whose "
                   "outcomes per workload and phase decide the verdict (seed000: sync misses "
                   "per token not higher, bonus-0 output identical, no timely hits turned "
                   "into exposed waits)")
    p.add_argument("--max-kl", type=float, help="quality gate: reject an arm whose mean "
                   "KL(exact || served) is above this many nats per token, whatever its speed")
    p.add_argument("--min-agreement", type=float, help="quality gate: reject an arm whose "
                   "top-1 agreement with exact routing is below this percentage, whatever its "
                   "speed")
    p.add_argument("--json", action="store_true")
    add_knob_flags(p)  # the base both arms start from; each arm's knobs go on top
    p.set_defaults(func=main)


def _progress(i: int, n: int, run: dict) -> None:
    print(f"run {i}/{n}: {run['workload']} {run['arm']} {run['ms_per_token']} ms/token",
          file=sys.stderr)


def main(args: argparse.Namespace) -> int:
    from tuner.measure.ab import Interrupted, arm_settings, run_ab
    from tuner.settings import SettingsError, apply

    for name, least in (("pairs", 1), ("tokens", 1), ("warmup", 0)):
        if getattr(args, name) < least:
            raise SystemExit(f"tuner ab: --{name} must be at least {least}")
    base = engine_settings(args)
    a, b = arm_settings(args.a, base), arm_settings(args.b, base)
    workloads = [w.strip() for w in args.workloads.split(",")] if args.workloads else None
    try:
        check_limits(args.max_kl, args.min_agreement)
        if workloads:  # each one checked before the first run
            [apply(base, {"workload": w}) for w in workloads]
        result = run_ab(a, b, args.pairs, args.tokens, args.warmup, _progress, workloads,
                        args.rules, args.max_kl, args.min_agreement)
    except (SettingsError, WorkloadError, ValueError) as err:
        raise SystemExit(f"tuner ab: {err}") from None
    except Interrupted as stop:  # what was measured is kept: shown, with no verdict
        if args.json:
            print_json({"interrupted": True, "planned_runs": stop.planned, "runs": stop.runs})
        else:
            _print_runs(stop.runs)
        print(f"tuner ab: interrupted after {len(stop.runs)} of {stop.planned} measured runs; "
              "no verdict without every pair and the sentinel A", file=sys.stderr)
        return INTERRUPTED
    result["labels"] = {"A": args.a, "B": args.b}
    if args.json:
        print_json(result)
        return 0
    _print(result)
    return 0


def _print(r: dict) -> None:
    print(f"A = {r['labels']['A']}, B = {r['labels']['B']} ({knob_change(r)}); "
          f"{r['model']}, {r['tokens']} tokens per run, {r['pairs']} pairs + sentinel A, "
          f"{r['warmup_runs']} warm-up run(s) of A not counted")
    print(f"start state: {r['start_state']}")
    _print_runs(r["runs"])
    print("\n".join(result_lines(r)))


def _print_runs(runs: list[dict]) -> None:
    print(f"{'run':>3} {'workload':<12} {'arm':>3} {'ms/token':>9} {'hit %':>7} "
          f"{'bytes/token':>12} {'KL':>10} {'top-1 %':>7} output")
    for run in runs:
        print(f"{run['run']:>3} {run['workload']:<12} {run['arm']:>3} "
              f"{run['ms_per_token']:>9.3f} {run['hit_rate']:>7.2f} "
              f"{run['bytes_per_token']:>12} {figure(run['quality_kl']):>10} "
              f"{figure(run['top1_agreement'], '%'):>7} {run['output_hash']}")
