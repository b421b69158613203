"""Per-layer budgets for a trace: computed from its hit curves, checked against one shared
LRU arena and an even per-layer split, written to and read from a budgets file.

A budgets file is JSON: what `plan` returns, whose `quotas` (one slot count per layer)
`tuner replay --budgets` and the `arena_budgets` knob take; `model`, `num_experts` and
`slots` say what the quotas were computed for.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tuner.errors import TunerError
from tuner.knobs import even_budgets
from tuner.traces.replay import pct, replay_rows
from tuner.traces.sizes import below_working_set, in_working_sets, working_set
from tuner.vocabulary import inputs
from tuner.vocabulary.budgets import WEIGHTS, allocate, by_layer, hit_curves, stall_weights
from tuner.vocabulary.slots import check_quotas
from tuner.vocabulary.trace_format import Trace

EVEN = "even"  # --budgets even: the arena shared evenly among the layers


class BudgetError(TunerError, ValueError):
    """Budgets that do not fit the arena, the model or the trace; the message says how."""


def weights_for(trace: Trace, weights: str) -> np.ndarray:
    """What one more hit is worth at each layer: 1, or the stall the recording measured
    for one miss there (ms)."""
    if weights not in WEIGHTS:
        raise BudgetError(f"weights {weights!r}: expected one of {', '.join(WEIGHTS)}")
    if weights == "hits":
        return np.ones(trace.layers)
    stall, misses = trace.meta.get("layer_stall_ms"), trace.meta.get("layer_sync_misses")
    if stall is None or misses is None:
        raise BudgetError("this trace has no per-layer stall (traces written by `tuner trace "
                          "record` have it; imported ones do not): use --weights hits")
    try:
        return stall_weights(stall, misses)
    except ValueError as err:
        raise BudgetError(str(err)) from None


def plan(trace: Trace, slots: int, weights: str = "hits") -> dict:
    """Quotas for an arena of `slots` shared by the trace's layers, with the hit curves
    they came from and the replays that check them (plain data, the budgets file)."""
    pairs = trace.layers * trace.num_experts
    if not 1 <= slots <= pairs:
        raise BudgetError(f"--slots {slots}: allowed 1..{pairs}, the trace's layer-expert "
                          "pairs")
    w = weights_for(trace, weights)
    rows = trace.rows()
    per_layer = by_layer(rows, trace.layers)
    curves = hit_curves(per_layer, min(trace.num_experts, slots))
    quotas = allocate(w[:, None] * curves, slots)
    even = even_budgets(slots, trace.layers)
    lookups = [sum(len(ids) for ids in r) for r in per_layer]
    layers = []
    for l, q in enumerate(quotas):
        gain = int(curves[l, q + 1] - curves[l, q]) if q + 1 < curves.shape[1] else 0
        layers.append({"layer": l, "quota": q, "even": even[l], "lookups": lookups[l],
                       "hits": int(curves[l, q]), "hits_even": int(curves[l, even[l]]),
                       "gain_per_slot": gain, "weight": round(float(w[l]), 6)})
    runs = {"global": None, EVEN: even, "budgets": quotas}
    checked = {}
    for name, q in runs.items():
        r = replay_rows(rows, trace.layers, "lru", slots, q)
        hits, total = int(r.hits.sum()), int(r.lookups.sum())
        checked[name] = {"hits": hits, "hit_rate": pct(hits, total),
                         "misses_per_token": round((total - hits) / trace.tokens, 3)}
        if weights == "stall":  # what the misses left would cost at the measured stall per miss
            checked[name]["stall_ms"] = round(float(w @ r.misses), 1)
    return {"model": trace.meta.get("model"), "num_experts": trace.num_experts,
            "layers_count": trace.layers, "tokens": trace.tokens, "slots": slots,
            "working_set": working_set(trace), "working_sets": in_working_sets(slots, trace),
            "weights": weights, "quotas": quotas, "layers": layers, "replay": checked,
            "notes": _notes(trace, slots, quotas)}


def _notes(trace: Trace, slots: int, quotas: list[int]) -> list[str]:
    """Warnings: an arena below one token's working set, layers below one routing."""
    out = [f"warning: {below_working_set(slots, trace)}"] if below_working_set(slots, trace) \
        else []
    short = [l for l, q in enumerate(quotas) if q < trace.top_k]
    if short:
        out.append(f"warning: layer(s) {', '.join(map(str, short))} get fewer slots than one "
                   f"routing (top-{trace.top_k}): the hits they give up cost less than they "
                   "buy elsewhere, but those layers miss nearly every lookup")
    return out


def load(path: Path) -> dict:
    """A budgets file; raises BudgetError naming what is wrong."""
    try:
        doc = inputs.loads(inputs.read_bytes(path, inputs.BUDGETS))
    except inputs.PathError as err:
        raise BudgetError(str(err)) from None
    except (OSError, json.JSONDecodeError) as err:
        raise BudgetError(f"{path}: not a budgets file (JSON): {err}") from None
    quotas = doc.get("quotas") if isinstance(doc, dict) else None
    if not isinstance(quotas, list) or not all(
            isinstance(q, int) and not isinstance(q, bool) for q in quotas):
        raise BudgetError(f"{path}: a budgets file is a JSON object whose 'quotas' is a list "
                          "of slot counts, one per layer (see `tuner budgets -o`)")
    return doc


def quotas_for_trace(doc: dict, trace: Trace, slots: int, where: str) -> list[int]:
    """The quotas of budgets file `doc` for replaying `trace` with `slots` slots; raises
    BudgetError when they were made for another model or do not fit."""
    model, experts = doc.get("model"), doc.get("num_experts")
    if (model and trace.meta.get("model") and model != trace.meta["model"]) or (
            experts is not None and experts != trace.num_experts):
        raise BudgetError(f"{where} was computed for model {model!r} ({experts} experts per "
                          f"layer); this trace is of {trace.meta.get('model')!r} "
                          f"({trace.num_experts} experts per layer)")
    try:
        check_quotas(doc["quotas"], trace.layers, slots, where)
    except ValueError as err:
        raise BudgetError(str(err)) from None
    return doc["quotas"]
