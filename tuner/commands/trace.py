"""`tuner trace record|import|stats`: write, bring in and describe routing traces."""

from __future__ import annotations

import argparse
from pathlib import Path

from tuner.commands.args import add_knob_flags, engine_settings, print_json
from tuner.errors import CommandError
from tuner.format import fixed
from tuner.traces.importers import (
    FORMATS,
    PHASES,
    PROBS_KEYS,
    SEQUENCE_KEYS,
    ImportFailed,
    Options,
    import_trace,
)
from tuner.traces.sizes import FORMS, parse_sizes
from tuner.traces.stats import trace_stats
from tuner.vocabulary import trace_format

SIZE_FORMS = FORMS.replace("%", "%%")  # for argparse help, which formats it with %


def print_notes(notes: list[str]) -> None:
    """A report's notes, warnings (which say so themselves) as they are."""
    for note in notes:
        print(note if note.startswith("warning:") else f"note: {note}")


def register(p: argparse.ArgumentParser) -> None:
    tsub = p.add_subparsers(dest="trace_command", required=True)

    rec = tsub.add_parser("record", help="decode N tokens and write the routings the engine saw")
    rec.add_argument("--tokens", type=int, default=512, help="tokens to decode (default 512)")
    rec.add_argument("-o", "--out", type=Path, required=True, help="trace file to write (.npz)")
    rec.add_argument("--logits", action="store_true", help="also keep every router logit "
                     "[tokens, layers, experts] and the stale gate's scores (layer l's router "
                     "on layer l-1's input)")
    add_knob_flags(rec)
    rec.set_defaults(func=_record)

    imp = tsub.add_parser("import", help="turn other engines' route logs into a trace, as "
                          "they are published")
    imp.add_argument("format", choices=FORMATS, help="jsonl: one JSON row per token and "
                     "layer; csv: one file per prompt or a layer, token, expert ids table; "
                     "vllm: vLLM's moe_layer{N}.jsonl route logs (see "
                     "tuner/traces/importers.py for the shapes)")
    imp.add_argument("src", type=Path, nargs="+", help="files, folders or globs; several "
                     "make one trace")
    imp.add_argument("-o", "--out", type=Path, required=True, help="trace file to write (.npz)")
    imp.add_argument("--num-experts", type=int, help="experts per layer (default: the log's "
                     "own figure, else the largest id + 1); ids at or above it are reported")
    imp.add_argument("--sequence-key", help="jsonl field that names a row's sequence "
                     f"(default: the first of {', '.join(SEQUENCE_KEYS)})")
    imp.add_argument("--probs-key", help="jsonl field that holds the gate weights (default: "
                     f"the first of {', '.join(PROBS_KEYS)})")
    imp.add_argument("--phase", choices=PHASES, default="decode", help="vllm: the decode "
                     "batches as one sequence per request (default), the prefill batch, or "
                     "both; warm-up batches are always dropped")
    imp.add_argument("--model", help="model name for the trace's meta")
    imp.add_argument("--expert-bytes", type=int, default=0, help="bytes of one expert, so "
                     "replay can report bytes per token")
    imp.add_argument("--json", action="store_true", help="print the import report as JSON")
    imp.set_defaults(func=_import)

    st = tsub.add_parser("stats", help="per layer and overall: popularity skew, prev-token "
                         "and stale-gate overlap, LRU / 2Q / Belady / pinning hit rates; "
                         "several traces side by side")
    st.add_argument("files", type=Path, nargs="+", metavar="FILE")
    st.add_argument("--slots", metavar="SIZES",
                    help="arena sizes of the cache figures, comma-separated, each "
                    f"{SIZE_FORMS} (default: 12.5, 25, 50 and 75 %% of the layer-expert "
                    "pairs)")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=_stats)


def _record(args: argparse.Namespace) -> int:
    if args.tokens < 1:
        raise CommandError("--tokens must be at least 1")
    settings = engine_settings(args)  # checked before torch loads
    from tuner.settings import to_config
    from tuner.traces.record import record

    trace, snap = record(to_config(settings), args.tokens, args.logits)
    trace_format.save(trace, args.out)
    t = snap["totals"]
    print(f"wrote {args.out}: {trace.tokens} tokens x {trace.layers} layers x top-{trace.top_k}"
          f" of {trace.num_experts} experts{', with logits' if args.logits else ''} "
          f"({trace.meta['model']})")
    print(f"live engine: arena {trace.meta['arena_slots']} slots, {trace.meta['policy']}, "
          f"{t['lookups']} lookups, {t['hits']} hits, {t['sync_misses']} sync misses")
    return 0


def _print_report(problems: dict, notes: list[str]) -> None:
    for note in notes:
        print(note)
    if not problems:
        print("no odd rows")
    for kind, p in problems.items():
        print(f"{kind}: {p['count']} - {p['what']}")
        for example in p["examples"]:
            print(f"    e.g. {example}")


def _import(args: argparse.Namespace) -> int:
    if args.num_experts is not None and args.num_experts < 1:
        raise CommandError("--num-experts must be at least 1")
    opts = Options(args.num_experts, args.sequence_key, args.probs_key, args.phase)
    try:
        trace = import_trace(args.format, args.src, opts, args.model, args.expert_bytes)
    except ImportFailed as err:  # what was read up to the failure, then the reason
        if args.json:
            print_json({"out": None, "problems": err.report, "notes": err.notes})
        else:
            _print_report(err.report, err.notes)
        raise
    trace_format.save(trace, args.out)
    problems, notes = trace.meta["import_problems"], trace.meta["import_notes"]
    if args.json:
        print_json({"out": str(args.out), "tokens": trace.tokens, "layers": trace.layers,
                    "top_k": trace.top_k, "num_experts": trace.num_experts,
                    "sequences": len(trace.sequence_starts), "probs": trace.probs is not None,
                    "problems": problems, "notes": notes})
        return 0
    inferred = " (inferred: largest id + 1)" if trace.meta.get("num_experts_inferred") else ""
    print(f"wrote {args.out}: {trace.tokens} tokens x {trace.layers} layers x up to "
          f"{trace.top_k} experts of {trace.num_experts}{inferred}, "
          f"{len(trace.sequence_starts)} sequence(s), gate weights "
          f"{'kept' if trace.probs is not None else 'not in the log'}")
    _print_report(problems, notes)
    return 0


CACHE_NAMES = {"lru": "LRU", "2q": "two-hit LRU", "opt": "Belady (opt)",
               "static": "most-routed pinned"}
# (label, key in totals, decimals) of the one-number figures, in the order they are compared
SUMMARY = (("top-10 % experts' share of routings, %", "top10_share", 1),
           ("Gini of routing counts", "gini", 2),
           ("entropy of routing shares (1 = uniform)", "entropy", 2),
           ("layer-expert pairs never routed, %", "unrouted_pct", 1),
           ("prev-token slot overlap, %", "prev_pct", 1),
           ("  the same, tokens shuffled, %", "prev_shuffled_pct", 1),
           ("  temporal: overlap - shuffled, pp", "prev_temporal_pp", 1),
           ("stale-gate slot overlap, %", "stale_pct", 1))


def _pcts(values: list) -> str:
    return " ".join(f"{fixed(v, '.1f'):>5}" for v in values)


def _print_stats(names: list[str], all_stats: list[dict]) -> None:
    for name, st in zip(names, all_stats):
        print(f"{name}: {st['model'] or '-'}, {st['tokens']} tokens x {st['layers_count']} "
              f"layers, top-{st['top_k']} of {st['num_experts']}, {st['sequences']} "
              f"sequence(s) ({st['source']})")
    width = max(24, *(len(n) + 1 for n in names))
    print(f"\n{'':44}" + "".join(f"{n:>{width}}" for n in names))
    for label, key, decimals in SUMMARY:
        print(f"{label:44}" + "".join(f"{fixed(st['totals'][key], f'.{decimals}f'):>{width}}"
                                      for st in all_stats))
    print(f"{'hit % at arena sizes (% of pairs):':44}" + "".join(
        f"{_pcts(st['arena_pct']):>{width}}" for st in all_stats))
    for cache, label in CACHE_NAMES.items():
        print(f"{'  ' + label:44}" + "".join(
            f"{_pcts(st['totals']['hit_rate'][cache]):>{width}}" for st in all_stats))
    print(f"{'  Belady - LRU, pp':44}" + "".join(f"{_pcts(_gap(st['totals'])):>{width}}"
                                                  for st in all_stats))
    for name, st in zip(names, all_stats):
        _print_layers(name, st)


def _gap(totals: dict) -> list[float | None]:
    return [None if o is None else round(o - lru, 2)
            for o, lru in zip(totals["hit_rate"]["opt"], totals["hit_rate"]["lru"])]


def _print_layers(name: str, st: dict) -> None:
    print(f"\n{name} per layer:")
    print(f"{'layer':>5} {'routings':>9} {'top10%':>6} {'gini':>5} {'entr':>5} {'unrtd':>5} "
          f"{'prev%':>5} {'shuf%':>5} {'stale%':>6}")
    for r in st["layers"]:
        print(f"{r['layer']:>5} {r['routings']:>9} {fixed(r['top10_share'], '.1f'):>6} "
              f"{fixed(r['gini'], '.2f'):>5} {fixed(r['entropy'], '.2f'):>5} {r['unrouted']:>5} "
              f"{_pcts([r['prev_pct'], r['prev_shuffled_pct']])} "
              f"{fixed(r.get('stale_pct'), '.1f'):>6}")
    sizes = _pcts(st["arena_pct"])
    print(f"{'':>5} " + " | ".join(f"{CACHE_NAMES[c][:23]:<23}" for c in CACHE_NAMES))
    print(f"{'layer':>5} " + " | ".join(f"{sizes:<23}" for _ in CACHE_NAMES))
    for r in st["layers"]:
        print(f"{r['layer']:>5} " + " | ".join(f"{_pcts(r['hit_rate'][c]):<23}"
                                                for c in CACHE_NAMES))


def _stats(args: argparse.Namespace) -> int:
    traces = [trace_format.load(f) for f in args.files]
    all_stats = [trace_stats(t, parse_sizes(args.slots, t, "--slots") if args.slots else None)
                 for t in traces]
    if args.json:
        print_json({"traces": [{"file": str(f), **st} for f, st in zip(args.files, all_stats)]})
        return 0
    _print_stats([f.name for f in args.files], all_stats)
    return 0
