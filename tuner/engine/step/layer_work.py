"""The host's part of a layer, whichever path ran it (seed 000 section 3, `at_layer` and
`after_layer`): count the routing and apply drop_cold, claim the experts it serves (hits
pinned, claimed speculation timely or late, a victim and a demand read for each miss in
rank order), read the next layer's predicted misses ahead, and land the layer's reads.
The host-driven path (host_driven.py), the device-first path (device_first.py) and
batched prefill (prefill.py) order these steps; the arena owns memory and the slot map,
the speculator speculation and limbo.
"""

from __future__ import annotations

import weakref
from collections.abc import Set
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from tuner.engine.memory.arena import Fetch
from tuner.engine.step import drop
from tuner.engine.step.predict import predict
from tuner.vocabulary.counters import C
from tuner.vocabulary.slots import BYPASS, CLAIMED_SPEC, HIT, RESIDENT

if TYPE_CHECKING:
    from tuner.engine.step.decode import Engine


@dataclass
class Routed:
    """One layer's routing as the host sees it after the layer's single sync."""

    sel: list[int]  # expert ids in rank order (a trace may leave a layer without any)
    selected: torch.Tensor | None  # the same on the compute device (the host-driven path)
    ctrl: np.ndarray | None  # the probe's control: this layer's router's scores on its input
    stale_next: np.ndarray | None  # layer l+1's router on this input [E], on the host
    scores: np.ndarray | None = None  # the selected experts' logits [k], host (drop_cold)
    ahead: frozenset[int] = frozenset()  # ranks the device found read ahead (claimed
    # speculation, device_step.Ahead)


class LayerWork:
    def __init__(self, engine: Engine):
        # a proxy: the engine owns this, and a cycle would keep a replaced engine's memory
        # until the collector runs instead of freeing it at the rebuild
        self.engine = weakref.proxy(engine)

    def account(self, l: int, routed: Routed, stale: np.ndarray | None,
                logits: torch.Tensor | None = None) -> tuple[list[int], list[int] | None]:
        """Counts the routing, logs it and applies drop_cold: (the experts computed, in
        rank order; the ranks they are, or None when all are). The probe (probe.py) scores
        them apart."""
        eng, sel = self.engine, routed.sel
        self.log(l, sel)
        if eng.cfg.cpu_pool:  # the adaptive tier's counts, read only by the three sites
            eng.tier.observe(l, sel, eng.cfg.adapt_decay)
        if eng.route_log is not None:
            assert logits is not None  # a recording takes the host-driven path
            eng.route_log.add(sel, logits, stale)
        ranks = self._drop(l, sel, routed.scores, routed.ahead) if eng.dropping and sel \
            else None
        if ranks is not None and len(ranks) == len(sel):
            ranks = None
        served = sel if ranks is None else [sel[r] for r in ranks]
        return served, ranks

    def log(self, l: int, sel: list[int]) -> None:
        """Counts layer l's routing `sel` and logs it by expert."""
        counters = self.engine.counters
        counters.per_expert.sel[l, :len(sel)] = sel
        counters.add(l, C.routings, len(sel))

    def serve(self, l: int, served: list[int], ranks: list[int] | None, routed: Routed,
              speculate: bool = True) -> tuple[list[int], list[Fetch], list[Fetch]]:
        """Claims the served experts (misses issue their reads) and, with `speculate`,
        reads ahead layer l+1's predicted misses: (the arena row of each, timely
        speculation, fetches to wait for)."""
        eng = self.engine
        ahead = routed.ahead if ranks is None else {i for i, r in enumerate(ranks)
                                                    if r in routed.ahead}
        rows, timely, waited, missed = self.claim(l, served, ahead)
        if missed:  # an indexed write costs even when it writes nothing
            eng.counters.per_expert.miss[l, [r if ranks is None else ranks[r]
                                             for r in missed]] = True
        if speculate and routed.stale_next is not None and eng.cfg.prefetch != "off":
            eng.spec.issue(eng.cfg, l + 1, self.guess(l + 1, routed.stale_next))
        return rows, timely, waited

    def guess(self, target: int, stale: np.ndarray) -> list[int]:
        """The predictor's ranked guess for layer `target`, less what drop_cold would drop."""
        eng = self.engine
        guess = predict(eng.cfg, eng.mc.top_k, eng.probe.prev[target], torch.from_numpy(stale),
                        lambda: eng.arena.mask_host[target])
        if eng.dropping and guess:  # prev names nothing on a sequence's first token
            guess = drop.speculable(guess, drop.share(stale[guess]), eng.cfg.drop_cold)
        return guess

    def ahead_settled(self, layer: int, issued: int, claimed: int) -> None:
        """Counts what the layer before read ahead for this one (device_step.Ahead): every
        read completes before the layer runs, so each is timely (counted at the claim) or
        unused; its bytes crossed the link once, claimed or not."""
        add = self.engine.counters.add
        add(layer, C.pf_issued, issued)
        add(layer, C.pf_unused, issued - claimed)
        add(layer, C.bytes_spec, issued * self.engine.ckpt.expert_bytes)

    def touch(self, target: int, stale: np.ndarray) -> None:
        """prefetch_touch with the device reading ahead: the guessed experts of layer
        `target` already resident are promoted as speculative hits, as `read_ahead` does."""
        slots = self.engine.slots
        for e in self.guess(target, stale):
            slot = slots.find((target, e))
            if slot is not None and slots.state[slot] == RESIDENT:
                slots.policy.touch(slot)

    def _drop(self, layer: int, sel: list[int], scores: np.ndarray | None,
              ahead: Set[int]) -> list[int]:
        """drop-cold-experts: the ranks of the routing that are computed (drop.py); the
        dropped ones are counted, as lookups too, so dropping never raises the hit rate."""
        assert scores is not None  # routed with the selected experts' logits when dropping
        eng = self.engine
        weights = drop.share(scores)
        present = [eng.slots.find((layer, e)) is not None or r in ahead
                   for r, e in enumerate(sel)]
        ranks = drop.kept(weights, present, eng.cfg.drop_cold)
        gone = len(sel) - len(ranks)
        if gone:
            add = eng.counters.add
            add(layer, C.lookups, gone)
            add(layer, C.dropped, gone)
            add(layer, C.dropped_mass, float(weights.sum() - weights[ranks].sum()))
            add(layer, C.bytes_dropped, gone * eng.ckpt.expert_bytes)
        return ranks

    def claim(self, layer: int, sel: list[int], ahead: Set[int] = frozenset(),
              stream: bool = True) -> tuple[list[int], list[Fetch], list[Fetch], list[int]]:
        """The arena row of each of `sel`, the timely speculation it claimed (counted here),
        the fetches it must wait for (demand reads and late speculation) and the positions
        in `sel` that missed. A late speculative read keeps its speculative flag: its bytes
        count as speculative. `ahead`: positions the device found read ahead, claimed as
        timely speculation and kept as a miss is. Without `stream` misses are read into
        staging rows and not kept."""
        eng = self.engine
        arena, slots, add = eng.arena, eng.slots, eng.counters.add
        add(layer, C.lookups, len(sel))
        plan = slots.claim_layer(layer, sel, stream)
        for key in slots.evicted:
            add(key[0], C.evictions)
        slots.evicted.clear()
        bypass = iter(arena.bypass)
        rows: list[int] = []
        timely: list[Fetch] = []
        # in rank order: fetches to wait for, and (key, row) of the demand reads, issued
        # together after the loop
        waiting: list[Fetch | tuple[tuple[int, int], int]] = []
        missed: list[int] = []
        hits = 0  # counted once: every hit of every layer of every token passes here
        for rank, (claim, e) in enumerate(zip(plan, sel)):
            row = claim.slot
            if row is None:  # a miss with no slot: a staging row (hits and spec have slots)
                row = next(bypass)
                if claim.kind == BYPASS:
                    add(layer, C.bypass)
            if claim.kind == HIT:
                hits += 1
            elif claim.kind == CLAIMED_SPEC:
                fetch = eng.spec.claim(layer, row)
                read = fetch.read
                if read.done.is_set() and read.complete:
                    add(layer, C.pf_timely)
                    add(layer, C.bytes_spec, read.bytes_read)
                    timely.append(fetch)
                else:
                    add(layer, C.pf_late)
                    eng.pool.promote(read)
                    waiting.append(fetch)
            elif rank in ahead:  # read ahead by the device: kept from its landing
                add(layer, C.pf_timely)
                waiting.append(arena.fetch((layer, e), row, speculative=True))
            else:  # miss or bypass: a demand read, in rank order
                add(layer, C.sync_misses)
                missed.append(rank)
                waiting.append(((layer, e), row))
            rows.append(row)
        add(layer, C.hits, hits)
        reads = iter(arena.fetch_all([w for w in waiting if isinstance(w, tuple)], False)
                     if missed else ())
        waited = [w if isinstance(w, Fetch) else next(reads) for w in waiting]
        return rows, timely, waited, missed

    def land(self, layer: int, timely: list[Fetch], waited: list[Fetch],
             in_place: bool = False) -> list[Fetch]:
        """Waits for the layer's reads (the stall), uploads what is not on the device yet
        (with `in_place`, Arena.stages: leaves it in staging) and counts the waited reads'
        bytes; returns the fetches left in staging for the layer's fix to read, their bytes
        counted as read in place."""
        add = self.engine.counters.add
        fetches = timely + waited
        add(layer, C.stall_ms, 1000 * self.engine.arena.land(fetches, in_place))
        for f in waited:
            add(layer, C.bytes_spec if f.read.speculative else C.bytes_demand, f.read.bytes_read)
        staged = [f for f in fetches if not f.uploaded] if in_place else []
        for f in staged:
            add(layer, C.bytes_direct, f.read.bytes_read)
        return staged

    def retire(self, layer: int) -> None:
        """After the layer: its unclaimed speculation into limbo, its pins off, the previous
        generation of limbo released (fixed points: read timing never moves residency)."""
        eng = self.engine
        eng.spec.retire(layer)
        eng.slots.pinned.clear()
        eng.spec.release_limbo(layer)
