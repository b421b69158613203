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

# sets of landing rows, used by layer in turn: a layer's set is read by the host after the
# layer, so it must outlive the bodies queued ahead of the host (LANDING_SETS - 1 layers)
LANDING_SETS = 3


class Experts:
    def __init__(self, mem: torch.Tensor, layout: Layout, k: int,
                 far: torch.Tensor | None = None):
        """mem [R, row bytes] uint8; up to k experts a batch. `far`: every expert's row in
        host memory (page-locked on CUDA), read in place for a row `mem` lacks: by the fused
        kernels (fused.Far), landing in one of LANDING_SETS sets of k rows on the device,
        or on the CPU by the gather. Not by the batched products on CUDA, whose graphs
        cannot pick rows by what they find."""
        self.mem, self.layout = mem, layout
        self.batch = torch.empty(k, mem.shape[1], dtype=torch.uint8, device=mem.device)
        self.fused = fused.usable(mem, layout)
        self.far = far if self.fused or not mem.is_cuda else None
        # on the CPU `far` is memory like `mem`: the host keeps a miss from it, nothing lands
        self.landing = None if self.far is None or not self.fused else \
            torch.zeros(LANDING_SETS, k, mem.shape[1], dtype=torch.uint8, device=mem.device)

    def gather(self, rows: torch.Tensor, far_rows: torch.Tensor | None = None) -> Weights:
        """The experts in `rows` (int64 on mem's device), in that order, as one batch; with
        `far_rows` (the CPU), a negative row read from `far` instead."""
        batch = self.batch[:len(rows)]
        if far_rows is None:
            torch.index_select(self.mem, 0, rows, out=batch)
            return self.layout.weights(batch)
        assert self.far is not None  # made with far
        torch.index_select(self.mem, 0, rows.clamp(min=0), out=batch)
        for j in (rows < 0).nonzero().flatten().tolist():  # eager: the CPU's rows are memory
            # a row copy each: indexed writes of whole uint8 rows are many times slower
            batch[j].copy_(self.far[int(far_rows[j])])
        return self.layout.weights(batch)

    def mix(self, x: torch.Tensor, w: torch.Tensor, rows: torch.Tensor,
            far_rows: torch.Tensor | None = None, layer: int = 0) -> torch.Tensor:
        """The experts in `rows` on x [D], weighted by w [k] and summed in rank order: [D]
        in x's dtype. With `far_rows` (rows of `far`), a negative row is read from `far`
        (on CUDA landing in layer `layer`'s landing set)."""
        if self.fused:
            far = None
            if far_rows is not None:
                assert self.far is not None and self.landing is not None  # made with far
                far = fused.Far(self.far, far_rows, self.landing[layer % LANDING_SETS, :len(rows)])
            return fused.mix(self.mem, rows, self.layout, x, w, far)
        return w.to(x.dtype) @ experts_out(x, self.gather(rows, far_rows))

    def landed(self, layer: int, rank: int) -> torch.Tensor:
        """The bytes of the expert of rank `rank` that layer `layer` read far."""
        assert self.landing is not None  # made with far
        return self.landing[layer % LANDING_SETS, rank]
