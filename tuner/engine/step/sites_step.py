"""The decode step of the three sites (`cpu_pool`, seed 002) where the model's routers route.

Each layer's body (device_step.py, with Route.sites: on CUDA one graph replay) attends,
routes and packs the MoE input beside the routing, so one wait on the layer's event brings
the host all it needs: the host counts the routing, the sites compute the experts (tiers.py:
residents on the device, the link share over the link, the rest on the CPU from the packed
input, with no copy of its own), and `finish` writes the layer's output on the device (where
the CPU site computed every routed expert, `finish_cpu`: one copy up, one replay). What
the split does not read (the routing's count and log, the probe's note, the layer's pins
and speculation retired) waits for the next layer's body to be queued, and runs while the
host would otherwise wait for that body (0.07 ms a layer on an H200's host). Eager
attention and routing cost a host-driven layer about as much as the CPU site's compute on
an H200's host; here they are one replay.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np
import torch

from tuner.engine.step.device_step import Pack
from tuner.vocabulary.counters import C

if TYPE_CHECKING:
    from tuner.engine.step.decode import Engine


class SitesStep:
    def __init__(self, engine: Engine):
        # a proxy, as LayerWork's
        self.engine = weakref.proxy(engine)

    def step(self, token: int, pos: int) -> torch.Tensor:
        """One token through every layer; its logits [V]."""
        eng = self.engine
        cfg, sites = eng.cfg, eng.sites
        assert sites is not None  # made when cpu_pool was first switched on
        run = eng.device_first.bodies()
        run.start(token, pos)
        stale: np.ndarray | None = None  # layer l's router on layer l-1's input, host
        done: tuple[int, Pack, np.ndarray | None] | None = None  # a layer computed, unsettled
        for l in range(eng.mc.num_layers):
            eng.spec.arrived(l)  # speculation issued before cpu_pool was switched on
            eng.arena.sync()  # the body reads the residency mask (moce) and the table
            run.run(l)
            if done is not None:  # under this body: the host would wait for it
                self._settle(*done)
            pack = run.read(l)
            # the split reads the tier's counts, this routing in them (drop_cold is off
            # with cpu_pool: the layer computes every routed expert)
            eng.tier.observe(l, pack.sel, cfg.adapt_decay)
            v = run.views[l]
            assert pack.x is not None  # the sites' route packs the input
            outs = sites.compute(l, v.x, pack.sel, cfg, eng.adapt_fetch,
                                 torch.from_numpy(pack.x))
            if outs.cpu_only:
                assert outs.cpu is not None  # the CPU site computed them
                run.finish_cpu(l, outs.cpu)
            else:
                run.finish(l, outs.sum(v.w, v.x))
            done, stale = (l, pack, stale), pack.stale_next
        assert done is not None  # a model has layers
        self._settle(*done)
        for l, (start, end) in enumerate(run.spans):
            eng.clock.between(l, C.layer_ms, start, end)
        return run.logits()

    def _settle(self, l: int, pack: Pack, stale: np.ndarray | None) -> None:
        """Layer l's routing counted and noted for the probe, its pins and speculation
        retired: nothing the layer's own split reads, so it waits for the next body."""
        eng = self.engine
        eng.work.log(l, pack.sel)
        eng.probe.note(l, pack.sel, pack.sel, pack.ctrl, stale)
        eng.work.retire(l)
