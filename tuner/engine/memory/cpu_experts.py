"""The CPU site's compute (seed 002): routed experts computed on the host's cores, read from
the host copy.

Alone, the CPU computes in float32 from the widened rows, as it computes every other
expert, so an expert's output does not depend on the site that computed it (bit for bit).
Beside a GPU the site computes on every core from the experts' own 16 bits: in float32 a
layer of OLMoE's bf16 experts took 14x its bytes' time, in bf16 1.04x (lab/cpu_site.py).
bf16 rows go through bf16_rows's kernel where numba is present, at about twice torch's read
rate; otherwise torch computes them in bf16, an expert at a time."""

from __future__ import annotations

import os

import torch

from tuner.engine.memory.host_copy import HostCopy
from tuner.engine.weights import bf16_rows
from tuner.engine.weights.model import experts_out


class CpuExperts:
    """`experts(x, keys)` -> the experts' outputs [k, D] for one token x, computed on the
    host; `dtype` is what x is to arrive in, `way` names how they are computed."""

    def __init__(self, host: HostCopy, beside_gpu: bool):
        self.host, layout = host, host.layout
        stored = layout.parts[0].dtype
        self.kernel = bf16_rows.load(host.mem, layout) if beside_gpu else None
        narrow = beside_gpu and layout.quant is None and stored != host.dtype
        self.dtype = torch.float32 if self.kernel else stored if narrow else host.dtype
        self.way = ("numba, bf16 rows read in place, float32 sums" if self.kernel else
                    f"torch, {str(self.dtype).removeprefix('torch.')}"
                    + (", an expert at a time" if narrow else ", widened batch"))
        self._all_cores = not narrow

    def __call__(self, x: torch.Tensor, keys: list[tuple[int, int]]) -> torch.Tensor:
        host = self.host
        if self.kernel is not None:
            return self.kernel([host.index(key) for key in keys], x)
        if not self._all_cores:  # OpenMP's thread count is per calling thread
            torch.set_num_threads(os.cpu_count() or 1)
            self._all_cores = True
        if x.dtype == host.dtype:
            return experts_out(x, host.gather(keys))
        # each expert from its row in its own dtype: no copy, its bytes read once
        return torch.cat([experts_out(x, host.layout.weights(host.row(key)[None]))
                          for key in keys])
