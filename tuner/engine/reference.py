"""The fully resident model: every expert read straight from host RAM, no arena, no I/O.

It is the yardstick for two things: the streaming engine's output must equal it bit for bit
with bonus 0 (on the same device), and `tuner bench` prices the streaming machinery as the
ratio of the engine's ms per token, every lookup a hit, to this model's.
"""

from __future__ import annotations

import torch

from tuner.engine import router
from tuner.engine.checkpoint import Checkpoint
from tuner.engine.model import Decoder, expert_out
from tuner.engine.tiers import HostCopy


class Resident:
    def __init__(self, ckpt: Checkpoint, context: int, device: torch.device):
        self.mc = ckpt.config
        self.dec = Decoder(self.mc, ckpt.dense(), context, device)
        host = HostCopy(ckpt)
        # every expert where the compute is: on a GPU the whole model is uploaded once
        self.experts = host.views if device.type == "cpu" else {
            key: tuple(t.to(device) for t in views) for key, views in host.views.items()}

    @torch.inference_mode()
    def step(self, token: int, pos: int) -> torch.Tensor:
        dec, mc = self.dec, self.mc
        h = dec.embed_token(token)
        for layer in range(mc.num_layers):
            h = dec.attention(layer, h, pos)
            x = dec.moe_input(layer, h)
            logits = dec.router_logits(layer, x)
            sel = router.select(logits, None, mc.top_k, 0, 0.0, 0.0).tolist()
            outs = [expert_out(x, *self.experts[(layer, e)]) for e in sel]
            w = router.weights(logits, torch.tensor(sel, device=h.device), mc.norm_topk_prob)
            h = h + dec.moe_output(layer, x, w, outs)
        return dec.logits(h)
