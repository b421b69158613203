"""Trace replay through the engine's own slot map and cache policies, with no compute.

One arena shared by all layers, or with per-layer quotas (`arena_split = layers`); tokens
in order, layers in order. Each routing is claimed
with `SlotMap.claim_layer`, the very call the live engine makes: wanted residents claimed
and pinned first, then each miss takes a victim in rank order. Pins are released after
each layer, as the engine does. With prefetch off and bonus 0 the live engine's hits and
misses are exactly these (a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuner.engine.policies import POLICIES
from tuner.engine.slots import SlotMap, check_quotas
from tuner.engine.trace_format import Trace
from tuner.errors import TunerError
from tuner.traces.belady import Belady, future_uses

POLICY_NAMES = (*POLICIES, "opt")
SWEEP_FACTORS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)  # default sweep sizes, times --slots


class ReplayError(TunerError, ValueError):
    """A replay asked of a policy or an arena size that does not exist."""


@dataclass
class Replay:
    policy: str
    slots: int
    lookups: np.ndarray  # [L]
    hits: np.ndarray  # [L]
    quotas: list[int] | None = None  # per-layer quotas, or None: one shared arena

    @property
    def misses(self) -> np.ndarray:
        return self.lookups - self.hits


def _arena(policy: str, slots: int, rows: list[list[list[int]]], quotas: list[int] | None
           ) -> tuple[SlotMap, Belady | None]:
    if policy not in POLICY_NAMES:
        raise ReplayError(f"policy {policy!r}: expected one of {', '.join(POLICY_NAMES)}")
    if slots < 1:
        raise ReplayError(f"slots = {slots}: the arena needs at least 1 slot")
    if policy != "opt":
        return SlotMap(slots, policy, quotas), None
    arena = SlotMap(slots, quotas=quotas)
    # The slot map builds online policies by name; the offline one needs the trace, so it
    # is handed in here, before any slot is used.
    arena.policy = oracle = Belady(arena.key, future_uses(rows))
    return arena, oracle


def replay_rows(rows: list[list[list[int]]], layers: int, policy: str, slots: int,
                quotas: list[int] | None = None, counted_from: int = 0) -> Replay:
    """Replays `rows` ([token][layer] -> expert ids, see Trace.rows), in one shared arena
    or with `quotas` slots per layer (checked against the arena and the layers); the tokens
    before `counted_from` only warm the arena."""
    if quotas is not None:
        check_quotas(quotas, layers, slots, "budgets")
    arena, oracle = _arena(policy, slots, rows, quotas)
    lookups, hits = np.zeros(layers, dtype=np.int64), np.zeros(layers, dtype=np.int64)
    step = 0
    for t, token in enumerate(rows):
        for layer, ids in enumerate(token):
            if oracle is not None:
                oracle.now = step
            plan = arena.claim_layer(layer, ids)
            arena.pinned.clear()
            arena.evicted.clear()
            if t >= counted_from:
                lookups[layer] += len(ids)
                hits[layer] += sum(kind == "hit" for kind, _ in plan)
            step += 1
    return Replay(policy, slots, lookups, hits, quotas)


def replay(trace: Trace, policy: str, slots: int, quotas: list[int] | None = None) -> Replay:
    return replay_rows(trace.rows(), trace.layers, policy, slots, quotas)


def sweep(trace: Trace, policy: str, sizes: list[int]) -> list[Replay]:
    rows = trace.rows()
    return [replay_rows(rows, trace.layers, policy, n) for n in sorted(set(sizes))]


def sweep_sizes(slots: int, trace: Trace) -> list[int]:
    """Sizes around `slots`, capped at the trace's layer-expert pairs."""
    pairs = trace.layers * trace.num_experts
    return sorted({min(pairs, max(1, round(slots * f))) for f in SWEEP_FACTORS})


def pct(num: float, den: float) -> float | None:
    return round(100.0 * float(num) / float(den), 2) if den else None


def report(r: Replay, trace: Trace) -> dict:
    """Plain data: per layer and in totals, lookups, hits, misses."""
    layers = [{"layer": l, "lookups": int(r.lookups[l]), "hits": int(r.hits[l]),
               "misses": int(r.misses[l]), "hit_rate": pct(r.hits[l], r.lookups[l]),
               "quota": None if r.quotas is None else r.quotas[l]}
              for l in range(len(r.lookups))]
    misses = int(r.misses.sum())
    totals = {"lookups": int(r.lookups.sum()), "hits": int(r.hits.sum()), "misses": misses,
              "hit_rate": pct(r.hits.sum(), r.lookups.sum()),
              "misses_per_token": round(misses / trace.tokens, 3) if trace.tokens else None,
              "bytes_per_token": (round(misses * trace.expert_bytes / trace.tokens)
                                  if trace.tokens and trace.expert_bytes else None)}
    return {"policy": r.policy, "slots": r.slots, "split": "global" if r.quotas is None
            else "layers", "tokens": trace.tokens,
            "model": trace.meta.get("model"), "layers": layers, "totals": totals,
            "notes": notes(trace)}


def sweep_report(runs: list[Replay], trace: Trace) -> dict:
    """Per-layer hit curves over arena sizes and the hits each added slot bought."""
    sizes = [r.slots for r in runs]
    hits = np.stack([r.hits for r in runs])  # [S, L]
    lookups = runs[0].lookups

    def marginal(h: np.ndarray) -> list[float]:  # hits per added slot, between sizes
        return [round(float(h[i + 1] - h[i]) / (sizes[i + 1] - sizes[i]), 3)
                for i in range(len(sizes) - 1)]

    layers = [{"layer": l, "lookups": int(lookups[l]), "hits": hits[:, l].tolist(),
               "hit_rate": [pct(h, lookups[l]) for h in hits[:, l]],
               "marginal_hits_per_slot": marginal(hits[:, l])}
              for l in range(trace.layers)]
    total = hits.sum(axis=1)
    totals = {"lookups": int(lookups.sum()), "hits": total.tolist(),
              "hit_rate": [pct(h, lookups.sum()) for h in total],
              "marginal_hits_per_slot": marginal(total)}
    return {"policy": runs[0].policy, "sizes": sizes, "tokens": trace.tokens,
            "model": trace.meta.get("model"), "layers": layers, "totals": totals,
            "notes": notes(trace)}


def notes(trace: Trace) -> list[str]:
    """What a reader must know before trusting a replay of this trace."""
    settings = trace.meta.get("settings") or {}
    out = []
    if settings.get("moce_bonus", 0) > 0 or settings.get("moce_bonus_r1", 0) > 0:
        out.append("recorded with a resident bonus: residency steered these routings, so a "
                   "replay under another policy or size is a screening test, not a forecast")
    problems = trace.meta.get("import_problems") or {}
    if problems:
        counts = ", ".join(f"{kind} {p['count']}" for kind, p in problems.items())
        out.append(f"imported with odd rows ({counts}); see the import report")
    return out
