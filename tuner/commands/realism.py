"""`tuner realism TRACE...`: each trace's routing shape and policy ranking beside the
model's own routing and public route logs, with Kendall's tau and the verdicts that
differ spelled out (tuner.traces.realism)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tuner.commands.args import print_json
from tuner.commands.trace import print_notes
from tuner.format import fixed
from tuner.traces import realism
from tuner.traces.realism import NAMES, SHAPE, SHARES_PCT, Routing
from tuner.vocabulary import trace_format
from tuner.vocabulary.trace_format import TraceError

WIDTH = 22  # of a column


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", type=Path, nargs="+", metavar="TRACE",
                   help="traces (.npz): your routing, imported or recorded")
    p.add_argument("--model-trace", type=Path, metavar="TRACE",
                   help="the model's own routing to compare with, recorded by `tuner trace "
                   "record` (default: the demo model's figures, as measured when it was made)")
    p.add_argument("--json", action="store_true")
    ship = p.add_mutually_exclusive_group()
    ship.add_argument("--write-model", action="store_true",
                      help="write the one TRACE's figures as the demo model's shipped ones "
                      "(TRACE: a recording of this version's demo model)")
    ship.add_argument("--write-public", metavar="NAME",
                      help="write the one TRACE's figures as the shipped ones of the public "
                      "log NAME (TRACE: that log, imported)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    loaded = [trace_format.load(f) for f in args.files]
    traces = [realism.measure(t, f.name) for t, f in zip(loaded, args.files)]
    if args.write_model or args.write_public:
        return _write(args, loaded, traces)
    if args.model_trace:
        model = realism.measure(trace_format.load(args.model_trace), args.model_trace.name,
                                "model")
        measured = f"recorded in {args.model_trace}"
    else:
        model, doc = realism.demo_routing()
        measured = f"as measured when it was made: {doc['measured_with']}"
    public = realism.public_logs()
    out = {**realism.report(traces, model, public), "model_measured": measured}
    if args.json:
        print_json(out)
    else:
        _print(traces, model, public, out)
    return 0


def _write(args: argparse.Namespace, loaded: list, traces: list[Routing]) -> int:
    if len(traces) != 1:
        raise TraceError(f"{len(traces)} traces given; the shipped figures are written from "
                         "one")
    trace, (f,) = loaded[0], args.files
    how = (f"{trace.meta.get('source') or 'a trace'} ({trace.tokens:,} tokens), then tuner "
           f"realism {f.name} --write-" + ("model" if args.write_model
                                          else f"public '{args.write_public}'"))
    if args.write_model:
        path = realism.write_model(traces[0], trace.meta, how)
    else:
        path = realism.write_public(traces[0], args.write_public, how)
    print(f"wrote {path}")
    return 0


def _about(r: Routing) -> str:
    return (f"{r.name}: {r.tokens} tokens x {r.layers} layers, top-{r.top_k} of {r.experts}"
            + (f", {r.phase}" if r.phase else "") + f" ({r.source})")


def _row(label: str, cells: list[str], tail: str = "") -> str:
    return f"{label:40}" + "".join(f"{c:>{WIDTH}}" for c in cells) + (f"  {tail}" if tail
                                                                       else "")


def _print(traces: list[Routing], model: Routing, public: list[Routing], out: dict) -> None:
    columns = [*traces, model, *public]
    sizes = " / ".join(str(s) for s in SHARES_PCT)
    for r in traces:
        print(_about(r))
    print(f"the model's own routing, {_about(model)}, {out['model_measured']}")
    print("public route logs (figures only, the logs are not shipped):")
    for r in public:
        print(f"  {_about(r)}")
    print()
    print(_row("", [c.short[:WIDTH - 1] for c in columns], "public decode logs"))
    for key, label, decimals in SHAPE:
        span = out["decode_range"][key]
        print(_row(label, [fixed(c.shape.get(key), f".{decimals}f") for c in columns],
                   "-".join(fixed(v, f".{decimals}f") for v in span) if span else "-"))
    print(_row("per-layer LRU hit vs depth, Spearman",
               [" ".join(fixed(v, ".2f") for v in c.depth_rho) or "-" for c in columns],
               f"at {sizes} %, each layer's hit in the one shared arena"))
    print(f"\nhit % at {sizes} % of the layer-expert pairs")
    print(_row("  arena slots", [" ".join(str(n) for n in c.slots) for c in columns]))
    print(_row("  in working sets (layers x top-k)",
               [" ".join(fixed(w, ".2f") for w in c.working_sets) for c in columns]))
    for mode in NAMES:
        print(_row(f"  {mode}", [" ".join(fixed(v, ".1f") for v in c.hit_rate[mode])
                                 if mode in c.hit_rate else "not measured" for c in columns]))
    print(f"\nranking, best first, at {sizes} %:")
    for c in (*traces, model):
        for i, share in enumerate(SHARES_PCT):
            print(f"  {c.name} at {share} %: {' > '.join(c.ranking(i))}")
    others = [model, *public]
    print(f"\nKendall's tau-b of the rankings at {sizes} % (over the modes both measured):")
    print(_row("", [o.short[:WIDTH - 1] for o in others]))
    for t in traces:
        print(_row(f"  {t.name}", [" ".join(fixed(v, ".2f") for v in out["tau"][t.name][o.name])
                                   for o in others]))
    lowest = out["public_tau"]["lowest"]
    if all(lowest):
        pairs = {tuple(low["logs"]) for low in lowest}
        print("  the public multi-layer logs against each other, lowest: "
              + " / ".join(f"{low['tau']:.2f}" for low in lowest)
              + f" ({'; '.join(' and '.join(p) for p in sorted(pairs))}): a tau up there is "
              "as close as real logs come to each other")
    for t in traces:
        found = out["disagreements"][t.name]
        print(f"\nwhere {t.name} and {model.name} disagree"
              + (":" if found else ": nowhere, at any size"))
        for d in found:
            print(f"  {d['text']}")
    print(f"\nthe {len(public)} public logs (beats / within {realism.TIE_PP} pp / loses):")
    for v in out["public_verdicts"]:
        if v["share_pct"] == SHARES_PCT[0]:
            print(f"  {NAMES[v['policy']]} against {NAMES[v['against']]}:", end="")
        print(f" {v['share_pct']} % {v['beats']}/{v['ties']}/{v['loses']}",
              end="\n" if v["share_pct"] == SHARES_PCT[-1] else ",")
    print_notes(out["notes"])
