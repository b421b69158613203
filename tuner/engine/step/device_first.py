"""The device-first decode step: each layer's device work runs first, the host's after it.

Where the model's routers route and misses stream into the arena, a layer's body
(device_step.py: on CUDA one graph replay a layer) routes, finds the resident experts in
the device's table and computes the layer without the host. The host then reads the
layer's pack and does its part (layer_work.py); when the device found every expert its
output stands and, on CUDA, the next layers were already queued before the host's
bookkeeping, so the hit path never waits on the host; on the CPU, where a body runs as it
is queued, the next bodies run while each computed its experts, and the host settles the
layers after them. The host counts the last token
(its probe scores, its layers' times) once this token's first layers are queued, not
between tokens, and after a token that ran each layer once it queues more of them, so the
counting runs under device work. Otherwise the layer's experts are
computed again once the misses landed (`fix`), with the same kernels, so the output is bit
for bit what computing them together gives; on CUDA with the disk store (`miss_direct`)
the fix reads the misses in place from the staging ring the store read them into, and the
host keeps them from the bytes it landed, with no upload of their own. With the RAM store
(`miss_direct`) the body reads its misses in place from host memory and the next layer's
predicted misses ahead (device_step.Ahead); its output stands, and the host only keeps
what it read in the arena.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np
import torch

from tuner.engine.memory.arena import Fetch
from tuner.engine.memory.experts import LANDING_SETS
from tuner.engine.step.device_step import Ahead, DeviceStep, Pack, Route
from tuner.engine.step.layer_work import Routed
from tuner.engine.step.predict import PREDICTORS
from tuner.vocabulary.counters import C

if TYPE_CHECKING:
    from tuner.engine.step.decode import Engine


# layers queued ahead of the host where a layer may be computed again (its misses land in
# the arena): a fix reruns the layers queued after it, so a deeper queue wastes device time
# on misses and absorbs the host's uneven settling on hits
QUEUE_AHEAD = 1
# the same after a token that ran each layer once (likely all hits again), until a layer
# runs again: the host counts the last token under the queued layers (0.3-0.4 ms against
# 0.1-0.2 ms of device work a layer on an H200)
QUEUE_AFTER_QUIET = 4


class DeviceFirst:
    def __init__(self, engine: Engine):
        # a proxy, as LayerWork's
        self.engine = weakref.proxy(engine)
        self.run: DeviceStep | None = None  # made when the device path first runs
        self._launched: list[tuple[int, int] | None] = [None] * engine.mc.num_layers
        self._runs = 0  # layer runs launched this token
        self._quiet = False  # the last token ran each layer once: this one likely will

    def bodies(self) -> DeviceStep:
        """The layers' bodies, made on first use."""
        eng = self.engine
        if self.run is None:
            self.run = DeviceStep(eng.dec, eng.arena.experts, eng.arena.table.dev,
                                  eng.arena.residency.dev, self.route())
        return self.run

    def route(self) -> Route:
        """How the bodies route and read ahead at the current settings; with `cpu_pool`
        they stop after routing and the sites compute the experts (sites_step.py)."""
        eng = self.engine
        cfg, sites = eng.cfg, bool(eng.cfg.cpu_pool)
        ahead = None if sites else self._ahead()
        if not eng.use_residency:  # exact top-k: the moce knobs change nothing
            return Route(probes=True, scores=eng.dropping, ahead=ahead, sites=sites)
        return Route(True, cfg.moce_protect, cfg.moce_bonus, cfg.moce_bonus_r1, probes=True,
                     scores=eng.dropping, ahead=ahead, sites=sites)

    def _ahead(self) -> Ahead | None:
        """With misses read in place the device speculates: each layer's body reads the
        next layer's predicted misses into its speculation rows (device_step.Ahead)."""
        eng = self.engine
        cfg, K = eng.cfg, eng.mc.top_k
        if cfg.prefetch == "off" or not eng.arena.experts.speculates:
            return None
        return Ahead(cfg.prefetch, min(cfg.prefetch_max or K, K),
                     PREDICTORS[cfg.prefetch].pick(cfg), cfg.drop_cold if eng.dropping else 0.0)

    def step(self, token: int, pos: int) -> torch.Tensor:
        """One token through every layer; its logits [V]."""
        eng = self.engine
        run, L, launched = self.bodies(), eng.mc.num_layers, self._launched
        launched[:] = [None] * L
        # layers queued ahead of the host: with misses read in place (no layer is ever
        # computed again) as many as the landing sets allow; else QUEUE_AHEAD, or
        # QUEUE_AFTER_QUIET until a layer runs again
        base = LANDING_SETS - 1 if eng.arena.direct else QUEUE_AHEAD
        ahead = QUEUE_AFTER_QUIET if self._quiet and not eng.arena.direct else base
        # a queued layer needs running again when its table or residency changed before
        # it was settled, unless every write into a row it reads is queued after it on the
        # compute stream (misses read in place: speculation is the bodies' own) and its
        # routing does not read residency: then what it read was still there
        still = eng.arena.direct and not eng.use_residency
        # on the CPU a body runs as it is queued, so the host knows at once whether it
        # computed its experts: the next ones run ahead while each did, unless the host's
        # settling issues speculation, whose victims may be rows of the layers ahead (run
        # again then). Settled together after their bodies, the layers of an every-hit
        # token took 1.15-1.16 of the fully resident model's time on a 2-core machine,
        # against 1.22 settled after each body (`tuner bench --only machinery`).
        cpu_ahead = not run.branchless and (eng.cfg.prefetch == "off"
                                             or run.route.ahead is not None)
        run.start(token, pos)
        self._runs = 0
        stale: np.ndarray | None = None
        for l in range(L):
            again = launched[l] is not None and not still and launched[l] != eng.arena.version(l)
            if launched[l] is None or again:
                self._launch(run, l)
            if again:  # the host changed what queued layers read: queue no deeper than base
                ahead = base
            stop = min(L, l + 1 + ahead) if run.branchless else L if cpu_ahead else l + 1
            for m in range(l + 1, stop):
                if not run.computes(m - 1):
                    break  # on the CPU layer m-1 left its experts to the host's fix
                if launched[m] is None:
                    self._launch(run, m)  # queued before the host waits on layer l
            if l == 0:  # the last token's counts, under this one's queued layers
                eng.count_last_token()
            pack = run.read(l)
            if self._settle(run, l, pack, stale) and l + 1 < L:
                launched[l + 1] = None  # it ran on this layer's output before the fix
                ahead = base
            stale = pack.stale_next
        self._quiet = self._runs == L
        for l, (start, end) in enumerate(run.spans):
            eng.clock.between(l, C.layer_ms, start, end)
        return run.logits()

    def _launch(self, run: DeviceStep, l: int) -> None:
        """Runs layer l's device work on the current table and residency. A layer run
        ahead of the host is kept only if the table and residency it ran on did not change
        until the host settled it: an upload into a row it read always changes its table,
        so uploads need not wait for it (only for `fix`, which marks its reads)."""
        eng = self.engine
        eng.spec.arrived(l)  # uploads (and enters into the table) speculation that arrived
        eng.arena.sync()
        self._launched[l] = eng.arena.version(l)
        self._runs += 1
        # runs queued before this one read a stale input (relaunching l+1 clears the rest)
        self._launched[l + 1:] = [None] * (len(self._launched) - l - 1)
        run.run(l)

    def _settle(self, run: DeviceStep, l: int, pack: Pack, stale: np.ndarray | None) -> bool:
        """The host's part of layer l after its device work: counts, claims, speculation,
        and, where the device did not find the experts the claims name, the misses landed
        and the layer computed again (True)."""
        eng = self.engine
        work, spec_lo = eng.work, eng.arena.experts.spec_lo
        ahead = frozenset(r for r, row in enumerate(pack.rows) if row >= spec_lo) \
            if pack.ahead else frozenset()
        routed = Routed(pack.sel, None, None, pack.stale_next, pack.scores, ahead)
        served, ranks = work.account(l, routed, stale)
        rows, timely, waited = work.serve(l, served, ranks, routed, run.route.ahead is None)
        if pack.ahead:
            work.ahead_settled(l, len(pack.ahead), len(routed.ahead))
        if run.route.ahead is not None and eng.cfg.prefetch_touch and pack.stale_next is not None:
            work.touch(l + 1, pack.stale_next)
        staged: list[Fetch] = []
        if eng.arena.direct:  # the body read its misses in place: its output stands
            fixed = ranks is not None  # unless drop_cold left some of them out
            self._keep(l, rows, ranks, timely, waited, pack.rows)
        else:
            fixed = bool(waited) or ranks is not None or rows != pack.rows
            if fixed:
                staged = work.land(l, timely, waited, in_place=eng.arena.stages)
        if fixed:
            entry = {f.row: f.entry for f in staged}  # the fix reads these from staging
            run.fix(l, [-1 if r in entry else r for r in rows], ranks,
                    [entry.get(r, -1) for r in rows] if staged else None)
            eng.arena.mark_used()
            if staged:
                eng.arena.keep_staged([(f, rows.index(f.row)) for f in staged])
        eng.probe.note(l, pack.sel, served, pack.ctrl, stale)
        work.retire(l)
        return fixed

    def _keep(self, layer: int, rows: list[int], ranks: list[int] | None,
              timely: list[Fetch], waited: list[Fetch], found: list[int]) -> None:
        """With misses read in place: each miss the body read far or found read ahead kept
        from the bytes it landed (`rows`: the row of each expert computed; `ranks`: their
        ranks in the routing, None when all are; `found`: the row the body read at each
        rank, -1 far). A miss the body still found near (evicted after the body was queued:
        its row's new bytes are queued after the body, so it read the old ones, but landed
        none) is copied in as on any path."""
        eng = self.engine
        add, spec_lo = eng.counters.add, eng.arena.experts.spec_lo
        rest, kept = [], []
        for f in waited:
            j = rows.index(f.row)
            rank = j if ranks is None else ranks[j]
            if 0 <= found[rank] < spec_lo:
                rest.append(f)
                continue
            kept.append((f, rank))
            if found[rank] < 0:  # read over the link now; read-ahead bytes counted at issue
                add(layer, C.bytes_demand, f.read.bytes_read)
                add(layer, C.bytes_direct, f.read.bytes_read)
        eng.arena.adopt(kept)
        if rest:
            eng.arena.mark_used()  # their copies wait for the bodies queued so far
        eng.work.land(layer, timely, rest)

    @torch.inference_mode()
    def warm_up(self) -> None:
        """On CUDA, makes what this path replays before a token needs it: each layer's
        graphs for every attention span and the kernels their first runs build. Their time
        is counted apart (warmup_ms on each layer's row), never in a token's."""
        eng = self.engine
        took = self.bodies().warm(fixes=not (eng.arena.direct or eng.cfg.cpu_pool))
        if any(took):
            for layer, seconds in enumerate(took):
                eng.counters.add(layer, C.warmup_ms, 1000 * seconds)
            eng.counters.end_token(0.0, tokens=0)
