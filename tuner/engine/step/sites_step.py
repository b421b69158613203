"""The decode step of the three sites (`cpu_pool`, seed 002) where the model's routers route.

Each layer's body (device_step.py, with Route.sites: on CUDA one graph replay) attends,
routes and packs the MoE input beside the routing, so one wait on the layer's event brings
the host all it needs: the host counts the routing, the sites compute the experts (tiers.py:
residents on the device, the link share over the link, the rest on the CPU from the packed
input, with no copy of its own), and `finish` writes the layer's output on the device (where
the CPU site computed every routed expert, `finish_cpu`: one copy up, one replay). Eager
attention and routing cost a host-driven layer about as much as the CPU site's compute on
an H200's host; here they are one replay.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np
import torch

from tuner.engine.step.layer_work import Routed
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
        cfg, work, sites = eng.cfg, eng.work, eng.sites
        assert sites is not None  # made when cpu_pool was first switched on
        run = eng.device_first.bodies()
        run.start(token, pos)
        stale: np.ndarray | None = None  # layer l's router on layer l-1's input, host
        for l in range(eng.mc.num_layers):
            eng.spec.arrived(l)  # speculation issued before cpu_pool was switched on
            eng.arena.sync()  # the body reads the residency mask (moce) and the table
            run.run(l)
            pack = run.read(l)
            routed = Routed(pack.sel, None, pack.ctrl, pack.stale_next)
            served, _ = work.account(l, routed, stale)  # drop_cold is off with cpu_pool
            eng.probe.note(l, pack.sel, served, pack.ctrl, stale)
            v = run.views[l]
            assert pack.x is not None  # the sites' route packs the input
            outs = sites.compute(l, v.x, pack.sel, cfg, eng.adapt_fetch,
                                 torch.from_numpy(pack.x))
            if outs.cpu_only:
                assert outs.cpu is not None  # the CPU site computed them
                run.finish_cpu(l, outs.cpu)
            else:
                run.finish(l, outs.sum(v.w, v.x))
            work.retire(l)
            stale = pack.stale_next
        for l, (start, end) in enumerate(run.spans):
            eng.clock.between(l, C.layer_ms, start, end)
        return run.logits()
