"""Trace replay through the engine's own slot map and cache policies, with no compute.

One arena shared by all layers, or with per-layer quotas (`arena_split = layers`); tokens
in order, layers in order. Each routing is claimed
with `SlotMap.claim_layer`, the very call the live engine makes: wanted residents claimed
and pinned first, then each miss takes a victim in rank order. Pins are released after
each layer, as the engine does. With prefetch off and bonus 0 the live engine's hits and
misses are exactly these (a test checks it); with `lru+prev` its hits plus its claimed
speculation are, with prefetch prev. The modes (policies, pinning, read-ahead) are
registered by name in modes.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tuner.errors import TunerError
from tuner.traces.modes import MODES
from tuner.traces.sizes import below_working_set, in_working_sets, working_set
from tuner.vocabulary.slots import check_quotas
from tuner.vocabulary.trace_format import Trace

SWEEP_FACTORS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)  # default sweep sizes, times --slots


class ReplayError(TunerError, ValueError):
    """A replay asked of a policy or an arena size that does not exist."""


@dataclass
class Replay:
    policy: str
    slots: int
    lookups: np.ndarray  # [L]
    hits: np.ndarray  # [L] lookups the arena served (resident, or read ahead and claimed)
    quotas: list[int] | None = None  # per-layer quotas, or None: one shared arena
    read_ahead: np.ndarray | None = None  # [L] experts read ahead (read-ahead modes only)

    @property
    def misses(self) -> np.ndarray:
        return self.lookups - self.hits


def replay_rows(rows: list[list[list[int]]], layers: int, policy: str, slots: int,
                quotas: list[int] | None = None, counted_from: int = 0,
                starts: list[int] | None = None) -> Replay:
    """Replays `rows` ([token][layer] -> expert ids, see Trace.rows) under `policy` (a
    mode's name), in one shared arena or with `quotas` slots per layer (checked against
    the arena and the layers); the tokens before `counted_from` only warm the arena.
    `starts`: the tokens where a sequence starts (the prev predictor has nothing there)."""
    if policy not in MODES:
        raise ReplayError(f"policy {policy!r}: expected one of {', '.join(MODES)}")
    if slots < 1:
        raise ReplayError(f"slots = {slots}: the arena needs at least 1 slot")
    if quotas is not None:
        check_quotas(quotas, layers, slots, "budgets")
    served = MODES[policy].run(rows, layers, slots, quotas, counted_from, starts or [0])
    return Replay(policy, slots, served.lookups, served.hits, quotas, served.read_ahead)


def replay(trace: Trace, policy: str, slots: int, quotas: list[int] | None = None) -> Replay:
    return replay_rows(trace.rows(), trace.layers, policy, slots, quotas,
                       starts=trace.sequence_starts)


def sweep(trace: Trace, policy: str, sizes: list[int]) -> list[Replay]:
    rows = trace.rows()
    return [replay_rows(rows, trace.layers, policy, n, starts=trace.sequence_starts)
            for n in sorted(set(sizes))]


def sweep_sizes(slots: int, trace: Trace) -> list[int]:
    """Sizes around `slots`, capped at the trace's layer-expert pairs."""
    pairs = trace.layers * trace.num_experts
    return sorted({min(pairs, max(1, round(slots * f))) for f in SWEEP_FACTORS})


def pct(num: float, den: float) -> float | None:
    return round(100.0 * float(num) / float(den), 2) if den else None


def report(r: Replay, trace: Trace) -> dict:
    """Plain data: per layer and in totals, lookups, hits, misses (and for a read-ahead
    mode the experts read ahead, whose bytes count in bytes per token)."""
    ahead = r.read_ahead if r.read_ahead is not None else np.zeros_like(r.lookups)
    layers = [{"layer": l, "lookups": int(r.lookups[l]), "hits": int(r.hits[l]),
               "misses": int(r.misses[l]), "hit_rate": pct(r.hits[l], r.lookups[l]),
               "quota": None if r.quotas is None else r.quotas[l],
               "read_ahead": None if r.read_ahead is None else int(ahead[l])}
              for l in range(len(r.lookups))]
    misses, read = int(r.misses.sum()), int(ahead.sum())
    T = trace.tokens
    totals = {"lookups": int(r.lookups.sum()), "hits": int(r.hits.sum()), "misses": misses,
              "hit_rate": pct(r.hits.sum(), r.lookups.sum()),
              "misses_per_token": round(misses / T, 3) if T else None,
              "read_ahead": None if r.read_ahead is None else read,
              "read_ahead_per_token": (round(read / T, 3) if T and r.read_ahead is not None
                                       else None),
              "bytes_per_token": (round((misses + read) * trace.expert_bytes / T)
                                  if T and trace.expert_bytes else None)}
    return {"policy": r.policy, "slots": r.slots, "split": "global" if r.quotas is None
            else "layers", "working_set": working_set(trace),
            "working_sets": in_working_sets(r.slots, trace), "tokens": T,
            "model": trace.meta.get("model"), "layers": layers, "totals": totals,
            "notes": notes(trace, [r.slots])}


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
    return {"policy": runs[0].policy, "sizes": sizes, "working_set": working_set(trace),
            "working_sets": [in_working_sets(n, trace) for n in sizes],
            "tokens": trace.tokens, "model": trace.meta.get("model"), "layers": layers,
            "totals": totals, "notes": notes(trace, sizes)}


def notes(trace: Trace, sizes: Sequence[int] = ()) -> list[str]:
    """What a reader must know before trusting a replay of this trace at these arena
    sizes."""
    settings = trace.meta.get("settings") or {}
    small = [n for n in sizes if below_working_set(n, trace)]
    out = [f"warning: {below_working_set(max(small), trace)}"] if small else []
    if settings.get("moce_bonus", 0) > 0 or settings.get("moce_bonus_r1", 0) > 0:
        out.append("recorded with a resident bonus: residency steered these routings, so a "
                   "replay under another policy or size is a screening test, not a forecast")
    problems = trace.meta.get("import_problems") or {}
    if problems:
        counts = ", ".join(f"{kind} {p['count']}" for kind, p in problems.items())
        out.append(f"imported with odd rows ({counts}); see the import report")
    return out
