"""`tuner budgets`: per-layer arena quotas from a trace's hit curves, checked by replay
against one shared LRU arena and an even per-layer split; written as a budgets file or
saved as a preset (`arena_split = layers`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tuner.commands.args import print_json
from tuner.commands.trace import SIZE_FORMS, print_notes
from tuner.traces.budgets import EVEN, BudgetError, plan
from tuner.traces.sizes import parse_size
from tuner.vocabulary import inputs, trace_format
from tuner.vocabulary.budgets import WEIGHTS


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help="trace file (.npz)")
    p.add_argument("--slots", metavar="SIZE", help=f"the arena to share among the layers: "
                   f"{SIZE_FORMS} (default: the arena the trace was recorded with)")
    p.add_argument("--weights", choices=WEIGHTS, default="hits",
                   help="hits: most hits; stall: most stall saved, from the stall per miss "
                        "the recording measured at each layer")
    p.add_argument("-o", "--out", type=Path, help="write the budgets file (JSON) here")
    p.add_argument("--save", metavar="NAME", help="save the quotas as a user preset")
    p.add_argument("--json", action="store_true", help="print the budgets file")
    p.set_defaults(func=main)


def preset_knobs(out: dict) -> dict:
    """The knobs that run an arena with these quotas."""
    return {"expert_cache": out["slots"], "arena_split": "layers",
            "arena_budgets": tuple(out["quotas"])}


def main(args: argparse.Namespace) -> int:
    trace = trace_format.load(args.file)
    slots = (parse_size(args.slots, trace, "--slots") if args.slots is not None
             else trace.meta.get("arena_slots"))
    if slots is None:
        raise BudgetError(f"{args.file}: the trace does not say its arena size; give --slots")
    out = {**plan(trace, slots, args.weights), "trace": str(args.file)}
    if args.out:
        inputs.write_atomic(args.out, lambda f: f.write((json.dumps(out, indent=1) + "\n")
                                                         .encode()))
    if args.save:
        from tuner.presets import Store
        from tuner.settings import validate

        description = (f"Per-layer quotas for {slots} slots from {args.file.name} "
                       f"({trace.tokens} tokens, weights {args.weights})")
        preset = Store().save(args.save, validate(preset_knobs(out)), description)
        print(f"saved {preset.path}", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print_json(out)
    else:
        _print(out)
    return 0


def _print(out: dict) -> None:
    print(f"{out['model'] or 'trace'}: {out['tokens']} tokens, {out['slots']} slots "
          f"({out['working_sets']} working sets of {out['working_set']}) shared by "
          f"{out['layers_count']} layers, weights {out['weights']}")
    print(f"{'layer':>5} {'quota':>6} {'even':>5} {'lookups':>8} {'hits':>8} {'at even':>8} "
          f"{'gain/slot':>9}")
    for r in out["layers"]:
        print(f"{r['layer']:>5} {r['quota']:>6} {r['even']:>5} {r['lookups']:>8} "
              f"{r['hits']:>8} {r['hits_even']:>8} {r['gain_per_slot']:>9}")
    names = {"global": "one shared LRU arena", EVEN: "even per-layer split",
             "budgets": "these budgets"}
    print("replayed through the engine's slot map (LRU):")
    for key, label in names.items():
        r = out["replay"][key]
        stall = f", stall {r['stall_ms']} ms at the measured ms per miss" if "stall_ms" in r \
            else ""
        print(f"  {label:22} {r['hits']:>9} hits ({r['hit_rate']} %), "
              f"{r['misses_per_token']} misses/token{stall}")
    print_notes(out["notes"])
