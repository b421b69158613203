"""Expert rows in one memory and the one way this process computes a weighted batch of them.

`mix` is every path's routed sum: a layer's body on the device, its fix after misses, the
host-driven path, the fully resident model and the quality probe's exact pass. On CUDA it
is two fused kernels that read each expert from its row (fused.py); elsewhere, and for
quantized experts, the batch is gathered and computed by the batched products
(model.experts_out). One way for all of them is what keeps their outputs bit-identical.
"""

from __future__ import annotations

import torch

from tuner.engine.weights import fused
from tuner.engine.weights.checkpoint import Layout
from tuner.engine.weights.model import Weights, Wide, by_row, experts_out, widens

# sets of landing rows, used by layer in turn: a layer's set is read by the host after the
# layer, so it must outlive the bodies queued ahead of the host (LANDING_SETS - 1 layers)
LANDING_SETS = 3
# sets of speculation rows, by layer in turn: layer l's body reads its set while it chooses
# layer l+1's (on the CPU it copies them as it chooses; on CUDA body l+1 copies them at its
# start)
SPEC_SETS = 2


def reads_far(device: torch.device, layout: Layout) -> bool:
    """Whether experts on `device` can be read in place from host memory (`far`): by the
    fused kernels, or on the CPU by the gather; not by the batched products on CUDA, whose
    graphs cannot pick rows by what they find."""
    return fused.usable(device, layout) or device.type != "cuda"


class Experts:
    def __init__(self, mem: torch.Tensor, layout: Layout, k: int,
                 far: torch.Tensor | None = None, spec: bool = False,
                 staging: torch.Tensor | None = None):
        """mem [R, row bytes] uint8; up to k experts a batch. `far`: every expert's row in
        host memory (page-locked on CUDA), read in place for a row `mem` lacks: by the fused
        kernels (fused.Far), landing in one of LANDING_SETS sets of k rows on the device,
        or on the CPU by the gather (`reads_far`). `spec` (with far): the last
        SPEC_SETS * k rows of `mem` hold a layer's experts read ahead, chosen by the body
        before it (`speculate`); their bytes land as a far expert's do when they are used.
        `staging`: page-locked rows the disk store reads into, which the fused kernels
        read in place by entry when a mix names it (`mix(..., far=staging)`), landing as
        a far expert does; kept only where the fused kernels serve this layout."""
        self.mem, self.layout, self.k = mem, layout, k
        self.batch = torch.empty(k, mem.shape[1], dtype=torch.uint8, device=mem.device)
        # the typed views of the batch's first n rows, by n: made once, as making them costs
        # several tensor operations a layer on the CPU
        self._batches = [layout.weights(self.batch[:n]) for n in range(k + 1)]
        self.fused = fused.usable(mem.device, layout)
        self.far = far if reads_far(mem.device, layout) else None
        self.staging = staging if self.fused else None
        # on the CPU `far` is memory like `mem`: the host keeps a miss from it, nothing lands
        self.landing = None if not self.fused or (self.far is None and self.staging is None) \
            else torch.zeros(LANDING_SETS, k, mem.shape[1], dtype=torch.uint8,
                             device=mem.device)
        self.spec_lo = mem.shape[0] - (SPEC_SETS * k if spec and self.far is not None else 0)
        # every row's typed views; on the CPU, each row's matrices, which a batch is widened
        # from row by row into `wide`, and far's
        self.typed = layout.weights(mem)
        rows = mem.device.type == "cpu" and layout.quant is None
        self.by_row = by_row(self.typed) if rows else []
        self.far_by_row = by_row(layout.weights(self.far)) \
            if rows and self.far is not None else []
        self.wide = Wide()

    @property
    def speculates(self) -> bool:
        """Layer bodies can read the next layer's experts ahead (`speculate`)."""
        return self.spec_lo < self.mem.shape[0]

    def spec_first(self, layer: int) -> int:
        """The first of layer `layer`'s k speculation rows."""
        return self.spec_lo + layer % SPEC_SETS * self.k

    def speculate(self, layer: int, src: torch.Tensor) -> None:
        """Reads layer `layer`'s predicted experts ahead into its speculation rows: row j
        from `far` row src[j] (int64 [k] on mem's device; -1 reads nothing)."""
        assert self.far is not None and self.speculates  # made with far and spec
        first = self.spec_first(layer)
        if self.fused:
            fused.copy_rows(self.mem, first, self.far, src)
            return
        for j, row in enumerate(src.tolist()):  # the CPU: the rows are memory
            if row >= 0:
                self.mem[first + j].copy_(self.far[row])

    def gather(self, rows: torch.Tensor, far_rows: torch.Tensor | None = None,
               dtype: torch.dtype | None = None) -> Weights:
        """The experts in `rows` (int64 on mem's device), in that order, as one batch; with
        `far_rows` (the CPU), a negative row read from `far` instead. Given the `dtype` they
        are computed in, experts stored narrower come widened from their rows (`wide`)."""
        if dtype is not None and widens(self.typed, dtype):
            ids = rows.tolist()
            far = far_rows.tolist() if far_rows is not None and min(ids) < 0 else []
            return self.wide.gather([self.by_row[r] if r >= 0 else self.far_by_row[far[j]]
                                     for j, r in enumerate(ids)], dtype)
        n = len(rows)
        batch = self.batch[:n]
        if far_rows is None:
            torch.index_select(self.mem, 0, rows, out=batch)
            return self._batches[n]
        assert self.far is not None  # made with far
        torch.index_select(self.mem, 0, rows.clamp(min=0), out=batch)
        for j in (rows < 0).nonzero().flatten().tolist():  # eager: the CPU's rows are memory
            # a row copy each: indexed writes of whole uint8 rows are many times slower
            batch[j].copy_(self.far[int(far_rows[j])])
        return self._batches[n]

    def mix(self, x: torch.Tensor, w: torch.Tensor, rows: torch.Tensor,
            far_rows: torch.Tensor | None = None, layer: int = 0,
            far: torch.Tensor | None = None) -> torch.Tensor:
        """The experts in `rows` on x [D], weighted by w [k] and summed in rank order: [D]
        in x's dtype. With `far_rows` (rows of `far`: the host copy unless given, such as
        `staging`), a negative row is read from `far` (on CUDA landing in layer `layer`'s
        landing set)."""
        if self.fused:
            where = None
            if far_rows is not None:
                far = self.far if far is None else far
                assert far is not None and self.landing is not None  # made with far
                where = fused.Far(far, far_rows, self.landing[layer % LANDING_SETS,
                                                              :len(rows)], self.spec_lo)
            return fused.mix(self.mem, rows, self.layout, x, w, where)
        return w.to(x.dtype) @ experts_out(x, self.gather(rows, far_rows, x.dtype))

    def landed(self, layer: int, rank: int) -> torch.Tensor:
        """The bytes of the expert of rank `rank` that layer `layer` read far."""
        assert self.landing is not None  # made with far
        return self.landing[layer % LANDING_SETS, rank]
