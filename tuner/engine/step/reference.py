"""The fully resident model: every expert in memory where the compute is, no arena, no I/O.

It is the yardstick for two things: the streaming engine's output must equal it bit for bit
with bonus 0 (on the same device), and `tuner bench` prices the streaming machinery as the
ratio of the engine's ms per token, every lookup a hit, to this model's. It computes the
routed experts with the engine's own batched kernels, gathered by the router's ids on the
device, so a token runs without a single host sync; where one token's shapes are fixed
(CUDA) it runs the engine's own layer bodies (device_step.py) over a table that finds every
expert, each layer one graph replay, queued back to back.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from tuner.engine.memory.experts import Experts
from tuner.engine.memory.host_copy import HostCopy
from tuner.engine.step.device_step import DeviceStep, Route
from tuner.engine.weights import router
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.engine.weights.model import Decoder, compute_dtype


class Resident:
    """`experts=False` leaves the routed experts out (their outputs zero, none loaded): what
    the rest of the model costs; its output is then meaningless."""

    def __init__(self, ckpt: Checkpoint, context: int, device: torch.device,
                 experts: bool = True):
        self.mc = ckpt.config
        self.dec = Decoder(self.mc, ckpt.dense(), context, device,
                           compute_dtype(ckpt.dtype, device))
        # [L*E, row bytes]: on a GPU the whole model, uploaded once
        self.experts = Experts(HostCopy(ckpt).mem.to(device), ckpt.layout, self.mc.top_k) \
            if experts else None
        self.no_experts = torch.zeros(self.mc.hidden_size, device=device, dtype=self.dec.dtype)
        L, E = self.mc.num_layers, self.mc.num_experts
        self.run = DeviceStep(self.dec, self.experts,
                              torch.arange(L * E, device=device).view(L, E), None, Route()) \
            if self.experts is not None and self.dec.fixed else None
        if self.run is not None:
            self.run.warm(fixes=False)  # graphs and kernels before the first timed token

    @torch.inference_mode()
    def step(self, token: int, pos: int) -> torch.Tensor:
        """Logits [V] (float32)."""
        if self.run is None:
            return exact_step(self.dec, token, pos, self._mix)
        self.run.start(token, pos)
        for layer in range(self.mc.num_layers):
            self.run.run(layer)
        return self.run.logits()

    def _mix(self, layer: int, x: torch.Tensor, sel: torch.Tensor, w: torch.Tensor
             ) -> torch.Tensor:
        if self.experts is None:
            return self.no_experts
        return self.experts.mix(x, w, sel + layer * self.mc.num_experts)


# (layer, x, the selected ids [k], their weights [k]) -> the routed experts' sum [D]
Mix = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def exact_step(dec: Decoder, token: int, pos: int, mix: Mix) -> torch.Tensor:
    """One token through every layer with exact top-k routing; `mix` computes the selected
    experts and sums them in rank order (Experts.mix). Logits [V] (float32). It writes this
    position's keys and values into the decoder's KV cache, as any step does."""
    mc = dec.cfg
    h = dec.embed_token(token)
    for layer in range(mc.num_layers):
        h = dec.attention(layer, h, pos)
        x = dec.moe_input(layer, h)
        logits = dec.router_logits(layer, x)
        sel = router.select(logits, None, mc.top_k, 0, 0.0, 0.0)
        w = router.weights(logits, sel, mc.norm_topk_prob)
        h = h + dec.shared_output(layer, x, mix(layer, x, sel, w))
    return dec.logits(h)
