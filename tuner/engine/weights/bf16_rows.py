"""A batch of bf16 experts computed on the host's cores, each read in place from its row,
summed in float32: the CPU site's kernel beside a GPU (numba).

Torch's bf16 products on the CPU read at a plain copy's rate (on the H200 machine's 16
cores, 30-39 GB/s: lab/cpu_kernels.py), about half of what llama.cpp's CPU kernels read
there. This kernel read 100.6 GB/s there (lab/cpu_bf16_variants.py: one output row an
iteration read 71 GB/s), and its float32 sums are closer to a float32 product (relative
error 3e-7, torch's bf16 way 4e-3). An iteration of the first parallel loop computes two
gate rows, their two up rows and the two activations; of the second, four down rows: four
rows streamed at once a thread, each load of the input serving four. The bf16s are read in
pairs as uint32 (the first is the low half shifted up, the second the high half masked)
against the input's even and odd elements: half the loads.

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

    # of a uint32 holding two bf16s (little-endian), the first and the second as float32:
    # a bf16's bits are a float32's upper half
    @numba.njit(inline="always")
    def lo(u):
        return np.uint32(u << np.uint32(16)).view(np.float32)

    @numba.njit(inline="always")
    def hi(u):
        return np.uint32(u & np.uint32(0xFFFF0000)).view(np.float32)

    @numba.njit(inline="always", fastmath=True)
    def dot4(w0, w1, w2, w3, ve, vo):
        """Four rows of bf16 pairs (slices from 0, so LLVM sees unit strides) dotted with
        the vector whose even elements are ve and odd ones vo."""
        a0 = a1 = a2 = a3 = np.float32(0.0)
        for i in range(ve.shape[0]):
            e, o = ve[i], vo[i]
            a0 += lo(w0[i]) * e + hi(w0[i]) * o
            a1 += lo(w1[i]) * e + hi(w1[i]) * o
            a2 += lo(w2[i]) * e + hi(w2[i]) * o
            a3 += lo(w3[i]) * e + hi(w3[i]) * o
        return a0, a1, a2, a3

    @numba.njit(inline="always", fastmath=True)
    def silu_mul(g, u):
        return g / (np.float32(1.0) + np.exp(-g)) * u

    # nogil: the link site's thread and the session's keep running while it computes
    @numba.njit(parallel=True, fastmath=True, cache=True, nogil=True)
    def experts(mem, rows, gate_up, down, inter, x, out):
        """mem [n, row] uint16 (the rows as bf16 bits); rows [k]; gate_up, down: where each
        matrix starts in a row, in elements (even); inter: I (even); x [D] float32 (D a
        multiple of 4) -> out [k, D] float32."""
        k, d, half, d2 = rows.shape[0], x.shape[0], inter // 2, x.shape[0] // 2
        xe, xo = x[0::2].copy(), x[1::2].copy()
        # the activations split as they are read: even and odd columns
        ae, ao = np.empty((k, half), np.float32), np.empty((k, half), np.float32)
        for t in numba.prange(k * half):
            j, o = t // half, t % half * 2
            w, g = mem[rows[j]].view(np.uint32), (gate_up + o * d) // 2
            u = g + inter * d2  # up row o: gate's I rows further on
            g0, g1, u0, u1 = dot4(w[g:g + d2], w[g + d2:g + d], w[u:u + d2], w[u + d2:u + d],
                                  xe, xo)
            ae[j, o // 2], ao[j, o // 2] = silu_mul(g0, u0), silu_mul(g1, u1)
        for t in numba.prange(k * d // 4):
            j, o = t // (d // 4), t % (d // 4) * 4
            w, s = mem[rows[j]].view(np.uint32), (down + o * inter) // 2
            out[j, o], out[j, o + 1], out[j, o + 2], out[j, o + 3] = dot4(
                w[s:s + half], w[s + half:s + 2 * half], w[s + 2 * half:s + 3 * half],
                w[s + 3 * half:s + 4 * half], ae[j], ao[j])

    return experts


class RowKernel:
    """The experts of a host copy `mem` [n, row_bytes] (uint8) laid out as `layout`, computed
    by row index: `kernel([rows], x)` -> [k, D] float32, in a buffer of the kernel's that the
    next call overwrites. Page-locked where the host copy is (beside a GPU), so the caller's
    copy to the device runs without a staging copy; the caller's stream has run that copy
    before it asks for another layer."""

    def __init__(self, fn, mem: torch.Tensor, layout: Layout):
        parts = layout.by_name
        self._fn, self._mem = fn, mem.view(torch.int16).numpy().view(np.uint16)
        self._gate_up, self._down = parts["gate"].offset // 2, parts["down"].offset // 2
        self._d, self._inter = parts["down"].shape
        self._pin = mem.is_pinned()
        self._out = torch.empty(0, self._d)
        self([0], torch.zeros(self._d))  # compiled (or loaded) now, not inside a token

    def __call__(self, rows: list[int], x: torch.Tensor) -> torch.Tensor:
        if len(rows) > len(self._out):
            self._out = torch.empty(len(rows), self._d, pin_memory=self._pin)
        out = self._out[:len(rows)]
        with _one_at_a_time:
            self._fn(self._mem, np.asarray(rows, np.int64), self._gate_up, self._down,
                     self._inter, x.to(torch.float32).contiguous().numpy(), out.numpy())
        return out


def load(mem: torch.Tensor, layout: Layout) -> RowKernel | None:
    """The kernel for a host copy of bf16 experts (unquantized, gate and up back to back,
    shapes the kernel's pairs and fours divide), or None where it does not apply or numba
    is absent."""
    parts = layout.by_name
    d, inter = parts["down"].shape
    if (layout.quant is not None or parts["gate"].dtype != torch.bfloat16 or d % 4
            or inter % 2 or layout.row_bytes % 4 or parts["gate"].offset % 4
            or parts["down"].offset % 4):
        return None
    fn = _kernel()
    return None if fn is None else RowKernel(fn, mem, layout)
