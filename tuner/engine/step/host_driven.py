"""The host-driven decode step: the host routes each layer before its experts are computed.

The path of the three sites (`cpu_pool`), a routing trace (the `routing` knob) and a route
recording: each layer's routing comes to the host in one sync (with the probe's control
and the next layer's router on this input, the stale gate), then the host claims, reads
ahead, lands and computes (layer_work.py), or hands the misses to the link and CPU sites
(tiers.py).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np
import torch

from tuner.engine.step.layer_work import Routed
from tuner.engine.step.routing_source import TraceRouting
from tuner.engine.weights import router
from tuner.vocabulary.counters import C

if TYPE_CHECKING:
    from tuner.engine.step.decode import Engine


class HostDriven:
    def __init__(self, engine: Engine):
        # a proxy, as LayerWork's
        self.engine = weakref.proxy(engine)

    def step(self, token: int, pos: int) -> torch.Tensor:
        """One token through every layer; its logits [V]."""
        eng = self.engine
        dec = eng.dec
        h = dec.embed_token(token)
        stale: np.ndarray | None = None  # layer l's router on layer l-1's input, host
        for l in range(eng.mc.num_layers):
            h = dec.attention(l, h, pos)
            x = dec.moe_input(l, h)
            with eng.clock.span(l, C.layer_ms):
                h, stale = self._moe(l, x, h, stale)
        return dec.logits(h)

    def _moe(self, l: int, x: torch.Tensor, h: torch.Tensor, stale: np.ndarray | None
             ) -> tuple[torch.Tensor, np.ndarray | None]:
        """One layer's MoE block: (new residual, layer l+1's router on this input)."""
        eng = self.engine
        cfg, work = eng.cfg, eng.work
        logits = eng.dec.router_logits(l, x)
        eng.spec.arrived(l)  # its upload overlaps the attention the GPU is still running
        routed = self._route(l, logits, x)
        sel = routed.sel
        served, ranks = work.account(l, routed, stale, logits)
        eng.probe.note(l, sel, served, routed.ctrl, stale)
        if sel:  # a trace may leave a layer without a routing for a token
            assert routed.selected is not None  # the host-driven path routes on the device
            w = router.weights(logits, routed.selected, eng.mc.norm_topk_prob)
            if ranks is not None:  # the dropped experts' shares are left out
                w = w[ranks]
        if cfg.cpu_pool:
            assert eng.sites is not None  # made when cpu_pool was first switched on
            y = eng.sites.compute(l, x, sel, cfg, eng.adapt_fetch).sum(w, x) if sel else None
        else:
            rows, timely, waited = work.serve(l, served, ranks, routed)
            work.land(l, timely, waited)
            y = eng.arena.mix(x, w, rows) if sel else None
        if y is not None:  # the layer routed
            h = h + eng.dec.shared_output(l, x, y)
        work.retire(l)
        return h, routed.stale_next

    def _route(self, layer: int, logits: torch.Tensor, x: torch.Tensor) -> Routed:
        """Routes the layer and brings what the host needs in one device-to-host copy: the
        selected ids, and from one product of their own, this layer's router (the probe's
        control) and layer l+1's router (the stale-gate prediction) on this input."""
        eng = self.engine
        cfg, mc = eng.cfg, eng.mc
        K, E = mc.top_k, mc.num_experts
        if eng.routing is not None:
            return self._route_trace(eng.routing, layer, logits)
        mask = eng.arena.mask(layer) if eng.use_residency else None
        selected = router.select(logits, mask, K, cfg.moce_protect, cfg.moce_bonus,
                                 cfg.moce_bonus_r1)
        has_next = layer + 1 < mc.num_layers
        routers = eng.dec.routers[layer:layer + 1 + has_next]  # [1 or 2, E, D]
        probes = routers.view(-1, mc.hidden_size) @ x.float()  # [E] ctrl, [E] stale
        parts = [selected.float(), probes] + ([logits[selected]] if eng.dropping else [])
        host = torch.cat(parts).cpu().numpy()  # the layer's one sync
        ctrl = host[K:K + E]
        stale_next = host[K + E:K + 2 * E] if has_next else None
        scores = host[-K:] if eng.dropping else None
        return Routed(host[:K].astype(np.int64).tolist(), selected, ctrl, stale_next, scores)

    def _route_trace(self, src: TraceRouting, layer: int, logits: torch.Tensor) -> Routed:
        """The trace's routing, with its own scores for the probe's control and the stale
        gate where it has them."""
        eng = self.engine
        resident = (lambda: eng.arena.mask(layer)) if eng.use_residency else None
        sel, selected = src.select(layer, resident, eng.cfg, eng.device)
        ctrl = src.scores("logits", layer)
        stale_next = src.stale(layer + 1) if layer + 1 < eng.mc.num_layers else None
        scores = logits[selected].cpu().numpy() if eng.dropping and sel else None
        return Routed(sel, selected, ctrl if sel else None, stale_next, scores)
