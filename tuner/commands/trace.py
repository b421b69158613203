"""`tuner trace record|import|stats`: write, bring in and describe routing traces."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from tuner.cli import add_knob_flags, int_list, print_json, settings_from_args
from tuner.settings import to_config
from tuner.traces import format as trace_format
from tuner.traces.budgets import BudgetError
from tuner.traces.format import TraceError
from tuner.traces.importers import FORMATS, import_trace
from tuner.traces.record import record
from tuner.traces.stats import trace_stats


def reporting_trace_errors(func):
    """A bad trace, source or budgets file is the user's input: one line on stderr, exit
    status 2."""

    @functools.wraps(func)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except (TraceError, BudgetError) as err:
            print(f"tuner: {err}", file=sys.stderr)
            return 2

    return wrapper


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="record, import or describe routing traces (.npz)")
    tsub = p.add_subparsers(dest="trace_command", required=True)

    rec = tsub.add_parser("record", help="decode N tokens and write the routings the engine saw")
    rec.add_argument("--tokens", type=int, default=512, help="tokens to decode (default 512)")
    rec.add_argument("-o", "--out", type=Path, required=True, help="trace file to write (.npz)")
    rec.add_argument("--logits", action="store_true", help="also keep every router logit "
                     "[tokens, layers, experts]")
    add_knob_flags(rec)
    rec.set_defaults(func=_record)

    imp = tsub.add_parser("import", help="turn another engine's route log into a trace")
    imp.add_argument("format", choices=FORMATS, help="jsonl: one JSON row per token and layer; "
                     "vllm: a folder of per-layer JSON-lines route logs; csv: layer, token, "
                     "expert ids (see tuner/traces/importers.py for the schemas)")
    imp.add_argument("src", type=Path, help="the file (jsonl, csv) or folder (vllm)")
    imp.add_argument("-o", "--out", type=Path, required=True, help="trace file to write (.npz)")
    imp.add_argument("--num-experts", type=int, help="experts per layer (default: the largest "
                     "id + 1); ids at or above it are reported")
    imp.add_argument("--model", help="model name for the trace's meta")
    imp.add_argument("--expert-bytes", type=int, default=0, help="bytes of one expert, so "
                     "replay can report bytes per token")
    imp.add_argument("--json", action="store_true", help="print the import report as JSON")
    imp.set_defaults(func=_import)

    st = tsub.add_parser("stats", help="per layer: popularity skew, prev-token overlap, LRU "
                         "hit curve")
    st.add_argument("file", type=Path)
    st.add_argument("--slots", type=int_list("arena sizes", 1),
                    help="arena sizes of the LRU hit curve "
                    "(default: 5, 10, 20 and 40 %% of the layer-expert pairs)")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=_stats)


@reporting_trace_errors
def _record(args: argparse.Namespace) -> int:
    if args.tokens < 1:
        raise SystemExit("tuner trace record: --tokens must be at least 1")
    trace, snap = record(to_config(settings_from_args(args)), args.tokens, args.logits)
    trace_format.save(trace, args.out)
    t = snap["totals"]
    print(f"wrote {args.out}: {trace.tokens} tokens x {trace.layers} layers x top-{trace.top_k}"
          f" of {trace.num_experts} experts{', with logits' if args.logits else ''} "
          f"({trace.meta['model']})")
    print(f"live engine: arena {trace.meta['arena_slots']} slots, {trace.meta['policy']}, "
          f"{t['lookups']} lookups, {t['hits']} hits, {t['sync_misses']} sync misses")
    return 0


@reporting_trace_errors
def _import(args: argparse.Namespace) -> int:
    if args.num_experts is not None and args.num_experts < 1:
        raise SystemExit("tuner trace import: --num-experts must be at least 1")
    trace = import_trace(args.format, args.src, args.num_experts, args.model, args.expert_bytes)
    trace_format.save(trace, args.out)
    problems = trace.meta["import_problems"]
    if args.json:
        print_json({"out": str(args.out), "tokens": trace.tokens, "layers": trace.layers,
                    "top_k": trace.top_k, "num_experts": trace.num_experts,
                    "problems": problems})
        return 0
    inferred = " (inferred: largest id + 1)" if trace.meta.get("num_experts_inferred") else ""
    print(f"wrote {args.out}: {trace.tokens} tokens x {trace.layers} layers x up to "
          f"{trace.top_k} experts of {trace.num_experts}{inferred}, "
          f"{len(trace.sequence_starts)} sequence(s)")
    if not problems:
        print("no odd rows")
    for kind, p in problems.items():
        print(f"{kind}: {p['count']} - {p['what']}")
        for example in p["examples"]:
            print(f"    e.g. {example}")
    return 0


def _pcts(values: list) -> str:
    return " ".join("     -" if v is None else f"{v:6.1f}" for v in values)


@reporting_trace_errors
def _stats(args: argparse.Namespace) -> int:
    stats = trace_stats(trace_format.load(args.file), args.slots)
    if args.json:
        print_json(stats)
        return 0
    t = stats["totals"]
    print(f"{stats['model'] or args.file.name}: {stats['tokens']} tokens x "
          f"{stats['layers_count']} layers, top-{stats['top_k']} of {stats['num_experts']} "
          f"({stats['source']})")
    print(f"top-10 % experts take {t['top10_share']} % of routings on average per layer; "
          f"prev-token overlap {t['prev_pct']} % of routed experts "
          f"({t['prev_whole_pct']} % whole routings)")
    sizes = " ".join(f"{n:>6}" for n in stats["lru_sizes"])
    print(f"{'':47}LRU hit % at arena slots")
    print(f"{'layer':>5} {'routings':>9} {'top10%':>7} {'max/mean':>9} {'prev%':>6} "
          f"{'whole%':>6} {sizes}")
    for r in stats["layers"]:
        print(f"{r['layer']:>5} {r['routings']:>9} {r['top10_share']:>7.1f} "
              f"{r['max_over_mean']:>9.2f} {_pcts([r['prev_pct'], r['prev_whole_pct']])} "
              f"{_pcts(r['lru_hit_rate'])}")
    print(f"{'all':>5} {'':>9} {t['top10_share']:>7.1f} {'':>9} "
          f"{_pcts([t['prev_pct'], t['prev_whole_pct']])} {_pcts(t['lru_hit_rate'])}")
    return 0
