"""`tuner ab A B`: interleaved A/B runs ending with a sentinel run of A, and a verdict."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from tuner.charts import plot_format
from tuner.commands.args import (
    add_knob_flags,
    add_model_flags,
    make_demo_model,
    model_values,
    print_json,
    settings_from_args,
)
from tuner.control.report import knob_change, result_lines
from tuner.errors import CommandError, Exit
from tuner.format import figure

if TYPE_CHECKING:
    from tuner.control.answers import ABResult, ABRun


def register(p: argparse.ArgumentParser) -> None:
    from tuner.control.models import ABSpec

    add_model_flags(p, ABSpec, defaults={"tokens": 128})  # longer runs than the server's
    p.add_argument("--warmup", type=int, default=1, help="unmeasured runs of A first, so the "
                   "page cache and lazy initialisation do not land on the first pair "
                   "(default 1)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--plot", metavar="FILE", help="also draw the runs and the pairs into FILE "
                   "(.svg, .png or .pdf)")
    add_knob_flags(p)  # the base both arms start from; each arm's knobs go on top
    p.set_defaults(func=main)


def _progress(i: int, n: int, run: ABRun) -> None:
    print(f"run {i}/{n}: {run['workload']} {run['arm']} {run['ms_per_token']} ms/token",
          file=sys.stderr)


def main(args: argparse.Namespace) -> int:
    from tuner.control.models import ABSpec, parse
    from tuner.measure.ab import Interrupted, arm_settings, run_ab

    if args.warmup < 0:
        raise CommandError("--warmup must be at least 0")
    if args.plot:
        plot_format(args.plot)
    spec = parse(ABSpec, model_values(args, ABSpec))  # every field checked before a run
    spec.check_files()
    base = settings_from_args(args)
    a, b = arm_settings(spec.a, base), arm_settings(spec.b, base)
    make_demo_model(args.command, base)
    try:
        result = run_ab(a, b, spec, args.warmup, _progress)
    except Interrupted as stop:  # what was measured is kept: shown, with no verdict
        if args.json:
            print_json({"interrupted": True, "planned_runs": stop.planned, "runs": stop.runs})
        else:
            _print_runs(stop.runs)
        _plot(args, stop.runs)
        print(f"tuner ab: interrupted after {len(stop.runs)} of {stop.planned} measured runs; "
              "no verdict without every pair and the sentinel A", file=sys.stderr)
        return Exit.INTERRUPTED
    labels = {"A": args.a, "B": args.b}
    _plot(args, result["runs"], result)
    if args.json:
        print_json({**result, "labels": labels})
    else:
        _print(result, labels)
    if result["interrupted"]:
        print("tuner ab: interrupted after every run was measured: the verdict stands",
              file=sys.stderr)
        return Exit.INTERRUPTED
    return Exit.REJECTED if result["rejected"] else Exit.OK


def _plot(args: argparse.Namespace, runs: list[ABRun], result: ABResult | None = None) -> None:
    if args.plot:
        from tuner import charts

        path = charts.write(charts.ab_chart(runs, result, (args.a, args.b)), args.plot)
        print(f"tuner ab: chart written to {path}", file=sys.stderr)


def _print(r: ABResult, labels: dict[str, str]) -> None:
    print(f"A = {labels['A']}, B = {labels['B']} ({knob_change(r)}); "
          f"{r['model']}, {r['tokens']} tokens per run, {r['pairs']} pairs + sentinel A, "
          f"{r['warmup_runs']} warm-up run(s) of A not counted")
    print(f"start state: {r['start_state']}")
    _print_runs(r["runs"])
    print("\n".join(result_lines(r)))


def _print_runs(runs: list[ABRun]) -> None:
    print(f"{'run':>3} {'workload':<12} {'arm':>3} {'ms/token':>9} {'hit %':>7} "
          f"{'bytes/token':>12} {'KL':>10} {'top-1 %':>7} output")
    for run in runs:
        print(f"{run['run']:>3} {run['workload']:<12} {run['arm']:>3} "
              f"{run['ms_per_token']:>9.3f} {run['hit_rate']:>7.2f} "
              f"{run['bytes_per_token']:>12} {figure(run['quality_kl']):>10} "
              f"{figure(run['top1_agreement'], '%'):>7} {run['output_hash']}")
