"""Turning routing rows from any source into a trace, with every odd row reported.

Readers yield `Routing` rows and note unreadable lines; `assemble` orders the rows into
[tokens, layers, k] and reports each oddity with a count, what was done about it and a
few examples. Nothing is dropped or changed without a line in the report.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from tuner.vocabulary.inputs import TRACE_SLOTS
from tuner.vocabulary.trace_format import MAX_EXPERTS, MAX_LAYERS, Trace, TraceError

EXAMPLES = 3
F32_MAX = float(np.finfo(np.float32).max)  # a trace stores gate probabilities in float32

# kind -> what it means and what the importer did about it
KINDS = {
    "unreadable": "lines that could not be read (skipped)",
    "restart": "token index went back or repeated at a layer: a new sequence or batch "
               "(rows kept, in file order)",
    "ignored_field": "fields or columns the importer does not use (give --sequence-key or "
                     "--probs-key if one holds sequence ids or gate weights)",
    "warmup": "rows of warm-up batches: dummy profiling and capture runs (every row routed "
              "alike) and batches before the first round of requests (dropped)",
    "other_phase": "rows of the phase not imported (dropped; see --phase)",
    "duplicate_routing": "a token and layer routed twice (the first row kept)",
    "trimmed": "a sequence's last token routed at only some layers, as when a log ends "
               "mid-token (token dropped)",
    "missing_layer": "tokens with no routing for a layer (left empty: no lookup)",
    "wrong_k": "routings with a different number of experts than most (kept; the rest of "
               "the row left empty)",
    "negative_id": "negative expert ids (slot left empty)",
    "out_of_range": "expert ids >= num_experts (slot left empty)",
    "duplicate_id": "an expert named twice in one routing (the repeat left empty)",
    "probs_mismatch": "gate probabilities not one per expert (dropped for that routing)",
    "probs_not_finite": "gate probabilities that are NaN, infinite or beyond float32's "
                        "range, in which a trace stores them (dropped for that routing)",
}


class Problems:
    """Odd rows by kind: a count and the first few examples."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {}

    def add(self, kind: str, example: str, count: int = 1) -> None:
        assert kind in KINDS, kind
        self.counts[kind] += count
        shown = self.examples.setdefault(kind, [])
        if len(shown) < EXAMPLES:
            shown.append(example)

    def as_dict(self) -> dict:
        return {kind: {"count": n, "what": KINDS[kind], "examples": self.examples[kind]}
                for kind, n in self.counts.items()}


@dataclass(slots=True)  # an import holds one per routing read
class Routing:
    where: str  # "file:line", for the report
    # (sequence label, token index): sequences in the order they first appear, tokens by
    # index within a sequence
    key: tuple[object, int]
    layer: int  # the source's layer id
    experts: list[int]  # rank order
    probs: list[float] | None = None


class Sequencer:
    """Token keys from a source's token indices: per layer, an index that goes back (or
    repeats) starts a new sequence. Layer-major and token-major files both work."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        self._last: dict[int, int] = {}
        self._sequence: Counter[int] = Counter()

    def key(self, layer: int, token: int, where: str) -> tuple[int, int]:
        last = self._last.get(layer)
        if last is not None and token <= last:
            self._sequence[layer] += 1
            self.problems.add("restart", f"{where}: layer {layer} token {token} after {last}")
        self._last[layer] = token
        return (self._sequence[layer], token)


def _checked(routings: list[Routing], problems: Problems) -> list[Routing]:
    """`routings` less repeats of a token and layer and each sequence's last token when it
    was routed at only some of the layers (a log that ends mid-token)."""
    seen: set[tuple] = set()
    kept = []
    for r in routings:
        if (r.key, r.layer) in seen:
            problems.add("duplicate_routing", f"{r.where}: token {r.key[1]}, layer {r.layer}")
            continue
        seen.add((r.key, r.layer))
        kept.append(r)
    layers = {r.layer for r in kept}
    last: dict[object, int] = {}
    for r in kept:
        last[r.key[0]] = max(last.get(r.key[0], r.key[1]), r.key[1])
    at: Counter[tuple] = Counter(r.key for r in kept if r.key[1] == last[r.key[0]])
    partial = {key for key, n in at.items() if n < len(layers)}
    for key in partial:
        where = next(r.where for r in kept if r.key == key)
        problems.add("trimmed", f"{where}: token {key[1]} routed at {at[key]} of "
                     f"{len(layers)} layers")
    return [r for r in kept if r.key not in partial]


def assemble(routings: list[Routing], problems: Problems, meta: dict,
             num_experts: int | None = None) -> Trace:
    """The trace of `routings`; `meta` is the source's (model, source, ...)."""
    routings = _checked(routings, problems)
    if not routings:
        raise TraceError(f"{meta.get('source', 'source')}: no routings found")
    layer_ids = sorted({r.layer for r in routings})
    column = {layer: i for i, layer in enumerate(layer_ids)}
    first = {}
    for r in routings:
        first.setdefault(r.key[0], len(first))
    keys = sorted({r.key for r in routings}, key=lambda k: (first[k[0]], k[1]))
    row = {key: i for i, key in enumerate(keys)}
    sequence_of = {label: i for i, label in enumerate(first)}
    widths = Counter(len(r.experts) for r in routings)
    usual = widths.most_common(1)[0][0]
    K = max(widths)
    inferred = num_experts is None
    if inferred:  # ids past what a trace may hold are reported as out of range
        num_experts = max(max((e for r in routings for e in r.experts if e < MAX_EXPERTS),
                              default=0) + 1, 1)
    slots = len(keys) * len(layer_ids) * K
    if len(layer_ids) > MAX_LAYERS or slots > TRACE_SLOTS:
        raise TraceError(f"{meta.get('source', 'source')}: {len(keys):,} tokens x "
                         f"{len(layer_ids):,} layers x {K:,} experts a routing; a trace holds "
                         f"1 to {MAX_LAYERS:,} layers and at most {TRACE_SLOTS:,} routed slots "
                         "(tokens x layers x experts a routing)")

    experts = np.full((len(keys), len(layer_ids), K), -1, dtype=np.int32)
    probs = np.full(experts.shape, np.nan, dtype=np.float32)
    has_probs = False
    present = np.zeros(experts.shape[:2], dtype=bool)
    for r in routings:
        t, l = row[r.key], column[r.layer]
        present[t, l] = True
        if len(r.experts) != usual:
            problems.add("wrong_k", f"{r.where}: {len(r.experts)} experts, most rows have {usual}")
        seen: set[int] = set()
        for rank, e in enumerate(r.experts):
            if e < 0:
                problems.add("negative_id", f"{r.where}: expert {e}")
            elif e >= num_experts or e >= MAX_EXPERTS:
                problems.add("out_of_range", f"{r.where}: expert {e} >= {num_experts}")
            elif e in seen:
                problems.add("duplicate_id", f"{r.where}: expert {e} at rank {rank}")
            else:
                experts[t, l, rank] = e
                seen.add(e)
        if r.probs is not None:
            if len(r.probs) != len(r.experts):
                problems.add("probs_mismatch", f"{r.where}: {len(r.probs)} probabilities for "
                             f"{len(r.experts)} experts")
            elif not all(-F32_MAX <= p <= F32_MAX for p in r.probs):  # NaN compares False
                problems.add("probs_not_finite", f"{r.where}: {r.probs}")
            else:
                probs[t, l, : len(r.probs)] = r.probs
                has_probs = True
    probs[experts < 0] = np.nan  # no probability where no expert is kept
    for t, l in np.argwhere(~present):
        label, token = keys[t]
        problems.add("missing_layer", f"sequence {sequence_of[label]} token {token}: no "
                     f"routing for layer {layer_ids[l]}")

    starts = [i for i, key in enumerate(keys) if i == 0 or key[0] != keys[i - 1][0]]
    meta = {**meta, "num_experts": num_experts, "sequence_starts": starts,
            "import_problems": problems.as_dict()}
    if inferred:
        meta["num_experts_inferred"] = True  # the largest id + 1: a lower bound
    if layer_ids != list(range(len(layer_ids))):
        meta["layer_ids"] = layer_ids
    trace = Trace(experts, meta, probs=probs if has_probs else None)
    trace.check(meta.get("source", "import"))
    return trace
