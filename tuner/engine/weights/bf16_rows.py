"""A batch of bf16 experts computed on the host's cores, each read in place from its row,
summed in float32: the CPU site's kernel beside a GPU (numba).

Torch's bf16 products on the CPU read at a plain copy's rate (on the H200 machine's 16
cores, 30-39 GB/s: lab/cpu_kernels.py), about half of what llama.cpp's CPU kernels read
there; this kernel read 63-65 GB/s (lab/cpu_bf16.py), and its float32 sums are closer to a
float32 product (relative error 3e-7, torch's bf16 way 4e-3). One output row per iteration
of a parallel loop: every expert's gate/up rows, the activation, then every down row.

numba is optional (the `gpu` extra): without it `load` returns None and the CPU site
computes through torch."""

from __future__ import annotations

import threading
from functools import cache

import numpy as np
import torch

from tuner.engine.weights.checkpoint import Layout

# numba's default thread layer (workqueue) aborts the process when two threads run a parallel
# kernel at once, as two engines' CPU sites in one process would
_one_at_a_time = threading.Lock()


@cache
def _kernel():
    """The compiled kernel, or None without numba. Compiled once a process (cached on disk
    by numba: a later process loads it)."""
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(inline="always")
    def bf16(u):  # a bf16's bits are a float32's upper half
        return np.uint32(np.uint32(u) << 16).view(np.float32)

    # nogil: the link site's thread and the session's keep running while it computes
    @numba.njit(parallel=True, fastmath=True, cache=True, nogil=True)
    def experts(mem, rows, gate_up, down, inter, x, out):
        """mem [n, row] uint16 (the rows as bf16 bits); rows [k]; gate_up, down: where each
        matrix starts in a row, in elements; inter: I; x [D] float32 -> out [k, D] float32."""
        k, d, two_i = rows.shape[0], x.shape[0], 2 * inter
        h = np.empty((k, two_i), np.float32)
        for t in numba.prange(k * two_i):
            j, o = t // two_i, t % two_i
            w = mem[rows[j], gate_up + o * d:gate_up + (o + 1) * d]
            acc = np.float32(0.0)
            for i in range(d):
                acc += bf16(w[i]) * x[i]
            h[j, o] = acc
        a = np.empty((k, inter), np.float32)
        for j in range(k):
            for i in range(inter):
                g = h[j, i]
                a[j, i] = g / (np.float32(1.0) + np.exp(-g)) * h[j, inter + i]
        for t in numba.prange(k * d):
            j, o = t // d, t % d
            w = mem[rows[j], down + o * inter:down + (o + 1) * inter]
            acc = np.float32(0.0)
            for i in range(inter):
                acc += bf16(w[i]) * a[j, i]
            out[j, o] = acc

    return experts


class RowKernel:
    """The experts of a host copy `mem` [n, row_bytes] (uint8) laid out as `layout`, computed
    by row index: `kernel([rows], x)` -> [k, D] float32."""

    def __init__(self, fn, mem: torch.Tensor, layout: Layout):
        parts = layout.by_name
        self._fn, self._mem = fn, mem.view(torch.int16).numpy().view(np.uint16)
        self._gate_up, self._down = parts["gate"].offset // 2, parts["down"].offset // 2
        self._d, self._inter = parts["down"].shape
        self([0], torch.zeros(self._d))  # compiled (or loaded) now, not inside a token

    def __call__(self, rows: list[int], x: torch.Tensor) -> torch.Tensor:
        out = np.empty((len(rows), self._d), np.float32)
        with _one_at_a_time:
            self._fn(self._mem, np.asarray(rows, np.int64), self._gate_up, self._down,
                     self._inter, x.to(torch.float32).contiguous().numpy(), out)
        return torch.from_numpy(out)


def load(mem: torch.Tensor, layout: Layout) -> RowKernel | None:
    """The kernel for a host copy of bf16 experts (unquantized, gate and up back to back),
    or None where it does not apply or numba is absent."""
    parts = layout.by_name
    if layout.quant is not None or parts["gate"].dtype != torch.bfloat16:
        return None
    fn = _kernel()
    return None if fn is None else RowKernel(fn, mem, layout)
