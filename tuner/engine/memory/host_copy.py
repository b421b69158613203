"""Every expert in host RAM: the CPU site's and the link's source (cpu_pool), the RAM store
(`expert_store = ram`) and the fully resident model's."""

from __future__ import annotations

from collections.abc import Callable

import torch

from tuner.engine.memory.store import Read, ReadPool
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.engine.weights.model import Weights, Wide, by_row, compute_dtype, widens

READERS = 4  # threads filling the host copy


class HostCopy:
    """Every expert's row in host RAM, read once into one allocation laid out like the
    arena. The same layout and alignment as an arena row matter: the CPU's matrix kernels
    take other code paths on unaligned data (a memory-mapped shard is only 8-byte aligned)
    and round differently, which would make the output depend on the site that computed an
    expert. On CUDA the copy is page-locked, so the link uploads straight from it."""

    def __init__(self, ckpt: Checkpoint, pin: bool = False,
                 check: Callable[[Read], str | None] | None = None):
        mc = ckpt.config
        self.experts, self.layout = mc.num_experts, ckpt.layout
        self.dtype = compute_dtype(ckpt.dtype, torch.device("cpu"))  # what the CPU computes in
        keys = [(l, e) for l in range(mc.num_layers) for e in range(mc.num_experts)]
        self.mem = torch.zeros(len(keys), ckpt.row_bytes, dtype=torch.uint8, pin_memory=pin)
        # gather's batch, or each row's matrices and the buffers it widens them into: one
        # user at a time
        self.batch = torch.empty(mc.top_k, ckpt.row_bytes, dtype=torch.uint8)
        typed = self.layout.weights(self.mem)
        self.by_row = by_row(typed) if widens(typed, self.dtype) else []
        self.wide = Wide()
        # the engine's reader and check, all queued at once
        pool = ReadPool(READERS, 0, False, 1 << 20, check=check)
        try:
            reads = pool.submit_all([(key, ckpt.extents(*key), self.row(key).numpy().data)
                                     for key in keys], False)
            for read in reads:
                pool.wait(read)
        finally:
            pool.close()

    def index(self, key: tuple[int, int]) -> int:
        """The row of expert `key` (layer, expert)."""
        return key[0] * self.experts + key[1]

    def row(self, key: tuple[int, int]) -> torch.Tensor:
        return self.mem[self.index(key)]

    def gather(self, keys: list[tuple[int, int]]) -> Weights:
        """The experts `keys` as one batch in host memory, widened to the CPU's compute dtype
        where stored narrower (Wide)."""
        rows = [self.index(key) for key in keys]
        if self.by_row:
            return self.wide.gather([self.by_row[r] for r in rows], self.dtype)
        idx = torch.tensor(rows, dtype=torch.int64)
        batch = self.batch[:len(keys)]
        torch.index_select(self.mem, 0, idx, out=batch)
        return self.layout.weights(batch)
