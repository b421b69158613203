"""`tuner replay`: a trace through the engine's cache policies, Belady's bound, pinning or
read-ahead, with no compute; per layer and in totals, or as hit curves over arena sizes
(given as slots, shares of the pairs or working sets)."""

from __future__ import annotations

import argparse
from itertools import pairwise
from pathlib import Path

from tuner.commands.args import print_json
from tuner.commands.trace import SIZE_FORMS, print_notes
from tuner.knobs import even_budgets
from tuner.traces import budgets
from tuner.traces.budgets import EVEN, BudgetError, quotas_for_trace
from tuner.traces.modes import MODES
from tuner.traces.replay import replay, report, sweep, sweep_report, sweep_sizes
from tuner.traces.sizes import parse_size, parse_sizes
from tuner.vocabulary import trace_format
from tuner.vocabulary.trace_format import Trace, TraceError


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help="trace file (.npz)")
    p.add_argument("--policy", choices=tuple(MODES), default="lru",
                   help="; ".join(f"{m.name}: {m.help}" for m in MODES.values()))
    p.add_argument("--slots", metavar="SIZE", help=f"the arena shared by all layers: {SIZE_FORMS} "
                   "(default: the arena the trace was recorded with)")
    p.add_argument("--sweep", action="store_true", help="hit curves per layer over arena "
                   "sizes around --slots and the hits each added slot buys")
    p.add_argument("--sizes", metavar="SIZES", help="the sweep's arena sizes, comma-separated, "
                   "each as --slots takes it, e.g. 64,25%%,2ws (implies --sweep)")
    p.add_argument("--budgets", metavar="FILE", help="per-layer quotas (arena_split = layers): "
                   f"a budgets file from `tuner budgets -o`, or '{EVEN}' for an even split")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def _slots(args: argparse.Namespace, trace: Trace) -> int:
    if args.slots is not None:
        return parse_size(args.slots, trace, "--slots")
    slots = None
    if args.budgets and args.budgets != EVEN:  # the arena they were made for
        slots = budgets.load(Path(args.budgets)).get("slots")
    if slots is None:
        slots = trace.meta.get("arena_slots")
    if slots is None:
        raise TraceError(f"{args.file}: the trace does not say its arena size; give --slots")
    return slots


def _quotas(args: argparse.Namespace, trace: Trace, slots: int) -> list[int] | None:
    if args.budgets is None:
        return None
    if args.budgets == EVEN:
        return even_budgets(slots, trace.layers)
    return quotas_for_trace(budgets.load(Path(args.budgets)), trace, slots, args.budgets)


def main(args: argparse.Namespace) -> int:
    trace = trace_format.load(args.file)
    sweeping = bool(args.sweep or args.sizes)
    if sweeping and args.budgets:
        raise BudgetError("--budgets fix the arena size, so they do not go with --sweep")
    if sweeping:
        sizes = (parse_sizes(args.sizes, trace, "--sizes") if args.sizes
                 else sweep_sizes(_slots(args, trace), trace))
        out = sweep_report(sweep(trace, args.policy, sizes), trace)
    else:
        slots = _slots(args, trace)
        out = report(replay(trace, args.policy, slots, _quotas(args, trace, slots)), trace)
    if args.json:
        print_json(out)
    else:
        (_print_sweep if sweeping else _print_replay)(out)
    return 0


def _head(out: dict) -> str:
    return f"{out['model'] or 'trace'}: {out['tokens']} tokens, policy {out['policy']}"


def _print_replay(out: dict) -> None:
    t = out["totals"]
    per_token = (f", {t['bytes_per_token']} bytes/token" if t["bytes_per_token"] is not None
                 else "")
    split = ", per-layer quotas" if out["split"] == "layers" else ""
    ahead = (f", {t['read_ahead_per_token']} read ahead/token" if t["read_ahead"] is not None
             else "")
    print(f"{_head(out)}, arena {out['slots']} slots ({out['working_sets']} working sets of "
          f"{out['working_set']}){split}: {t['hits']} hits, {t['misses']} misses of "
          f"{t['lookups']} lookups (hit rate {t['hit_rate']} %, {t['misses_per_token']} "
          f"misses/token{ahead}{per_token})")
    print(f"{'layer':>5} {'quota':>6} {'lookups':>9} {'hits':>9} {'misses':>9} {'hit%':>6}")
    for r in out["layers"] + [{**t, "layer": "all", "quota": out["slots"]}]:
        rate = "-" if r["hit_rate"] is None else f"{r['hit_rate']:.1f}"
        quota = "-" if r["quota"] is None else r["quota"]
        print(f"{r['layer']:>5} {quota:>6} {r['lookups']:>9} {r['hits']:>9} {r['misses']:>9} "
              f"{rate:>6}")
    print_notes(out["notes"])


def _print_sweep(out: dict) -> None:
    sizes = out["sizes"]
    print(f"{_head(out)}: hit % per layer over arena sizes, then hits per added slot "
          "between consecutive sizes")
    rates = " ".join(f"{n:>6}" for n in sizes)
    steps = " ".join(f"{f'{a}-{b}':>9}" for a, b in pairwise(sizes))
    print(f"{'layer':>5} {rates} | {steps}")
    print(f"{'ws':>5} " + " ".join(f"{w:>6}" for w in out["working_sets"])
          + f" | working sets of {out['working_set']} (layers x top-k)")
    for r in out["layers"] + [{**out["totals"], "layer": "all"}]:
        rates = " ".join("     -" if v is None else f"{v:6.1f}" for v in r["hit_rate"])
        steps = " ".join(f"{m:9.3f}" for m in r["marginal_hits_per_slot"])
        print(f"{r['layer']:>5} {rates} | {steps}")
    print_notes(out["notes"])
