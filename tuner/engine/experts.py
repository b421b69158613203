"""Expert rows in one memory and the one way this process computes a weighted batch of them.

`mix` is every path's routed sum: a layer's body on the device, its fix after misses, the
host-driven path, the fully resident model and the quality probe's exact pass. On CUDA it
is two fused kernels that read each expert from its row (fused.py); elsewhere, and for
quantized experts, the batch is gathered and computed by the batched products
(model.experts_out). One way for all of them is what keeps their outputs bit-identical.
"""

from __future__ import annotations

import torch

from tuner.engine import fused
from tuner.engine.checkpoint import Layout
from tuner.engine.model import Weights, experts_out


class Experts:
    def __init__(self, mem: torch.Tensor, layout: Layout, k: int):
        """mem [R, row bytes] uint8; up to k experts a batch."""
        self.mem, self.layout = mem, layout
        self.batch = torch.empty(k, mem.shape[1], dtype=torch.uint8, device=mem.device)
        self.fused = fused.usable(mem, layout)

    def gather(self, rows: torch.Tensor) -> Weights:
        """The experts in `rows` (int64 on mem's device), in that order, as one batch."""
        batch = self.batch[:len(rows)]
        torch.index_select(self.mem, 0, rows, out=batch)
        return self.layout.weights(batch)

    def mix(self, x: torch.Tensor, w: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """The experts in `rows` on x [D], weighted by w [k] and summed in rank order: [D]
        in x's dtype."""
        if self.fused:
            return fused.mix(self.mem, rows, self.layout, x, w)
        return w.to(x.dtype) @ experts_out(x, self.gather(rows))
