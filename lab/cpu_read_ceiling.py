"""How close the CPU site's kernel (tuner/engine/weights/bf16_rows.py) comes to reading its
bytes as fast as the host's cores can read them at all, on a host copy the size of a whole
model's experts (layers x 64 of OLMoE's, copies of lab/cpu_layer.py's 64), each layer's
top-k drawn from all of them as a token's are:

  product  the product kernel
  wide     the same, eight rows an iteration (4 gate and 4 up, then 8 down): twice the
           rows in flight a thread
  read     the same rows read flat, a contiguous 64 KiB of a row an iteration, summed as
           uint32: no product at all, the ceiling for these bytes on these threads

Prints ms a layer's top-k (fastest of the rounds, interleaved) and GB/s of expert bytes;
checks wide against product (float32 rounding only).

    PYTHONPATH=. python3 lab/cpu_read_ceiling.py [threads] [layers]
"""

import sys
import time

import tuner  # noqa: F401  before torch: OpenMP's spin beside a GPU (tuner/openmp.py)

# isort: split
import numba
import numpy as np
import torch

from lab.cpu_layer import D, E, I, K, Layer
from tuner.engine.weights import bf16_rows

LAYERS = int(sys.argv[2]) if len(sys.argv) > 2 else 16
CHUNK = 16384  # uint32s a `read` iteration sums: 64 KiB
jit = numba.njit(parallel=True, fastmath=True, nogil=True, cache=False)
inline = numba.njit(inline="always", fastmath=True)


@inline
def lo(u):
    return np.uint32(u << np.uint32(16)).view(np.float32)


@inline
def hi(u):
    return np.uint32(u & np.uint32(0xFFFF0000)).view(np.float32)


@inline
def silu_mul(g, u):
    return g / (np.float32(1.0) + np.exp(-g)) * u


@inline
def dot8(w0, w1, w2, w3, w4, w5, w6, w7, ve, vo):
    """Eight rows of bf16 pairs dotted with the vector whose even elements are ve, odd vo."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
    for i in range(ve.shape[0]):
        e, o = ve[i], vo[i]
        a0 += lo(w0[i]) * e + hi(w0[i]) * o
        a1 += lo(w1[i]) * e + hi(w1[i]) * o
        a2 += lo(w2[i]) * e + hi(w2[i]) * o
        a3 += lo(w3[i]) * e + hi(w3[i]) * o
        a4 += lo(w4[i]) * e + hi(w4[i]) * o
        a5 += lo(w5[i]) * e + hi(w5[i]) * o
        a6 += lo(w6[i]) * e + hi(w6[i]) * o
        a7 += lo(w7[i]) * e + hi(w7[i]) * o
    return a0, a1, a2, a3, a4, a5, a6, a7


@jit
def wide(mem, rows, gate_up, down, inter, x, out):
    k, d, half, d2 = rows.shape[0], x.shape[0], inter // 2, x.shape[0] // 2
    xe, xo = x[0::2].copy(), x[1::2].copy()
    ae, ao = np.empty((k, half), np.float32), np.empty((k, half), np.float32)
    q = inter // 4
    for t in numba.prange(k * q):
        j, o = t // q, t % q * 4
        w, g = mem[rows[j]].view(np.uint32), (gate_up + o * d) // 2
        u = g + inter * d2
        g0, g1, g2, g3, u0, u1, u2, u3 = dot8(
            w[g:g + d2], w[g + d2:g + 2 * d2], w[g + 2 * d2:g + 3 * d2], w[g + 3 * d2:g + d * 2],
            w[u:u + d2], w[u + d2:u + 2 * d2], w[u + 2 * d2:u + 3 * d2], w[u + 3 * d2:u + d * 2],
            xe, xo)
        ae[j, o // 2], ao[j, o // 2] = silu_mul(g0, u0), silu_mul(g1, u1)
        ae[j, o // 2 + 1], ao[j, o // 2 + 1] = silu_mul(g2, u2), silu_mul(g3, u3)
    for t in numba.prange(k * d // 8):
        j, o = t // (d // 8), t % (d // 8) * 8
        w, s = mem[rows[j]].view(np.uint32), (down + o * inter) // 2
        r = [w[s + m * half:s + (m + 1) * half] for m in range(8)]
        out[j, o], out[j, o + 1], out[j, o + 2], out[j, o + 3], out[j, o + 4], \
            out[j, o + 5], out[j, o + 6], out[j, o + 7] = dot8(
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], ae[j], ao[j])


@jit
def read(mem, rows, gate_up, down, inter, x, out):
    k, c = rows.shape[0], mem.shape[1] // 2 // CHUNK
    for t in numba.prange(k * c):
        j, s = t // c, t % c * CHUNK
        w = mem[rows[j]].view(np.uint32)[s:s + CHUNK]
        acc = np.uint32(0)
        for i in range(CHUNK):
            acc += w[i]
        out[j, t % c] = np.float32(acc)


layer = Layer()
numba.set_num_threads(layer.threads)
one, gu_n = layer.host_rows()  # [E, row] uint16
mem = np.concatenate([one] * LAYERS)  # a whole model's experts, as the host copy holds them
row_bytes = mem.shape[1] * 2
print(f"threads {layer.threads}, {LAYERS} x {E} experts, {mem.nbytes / 1e9:.1f} GB, "
      f"numba {numba.__version__}")
x = layer.x.to(torch.bfloat16).float().numpy()
kernels = {"product": bf16_rows._kernel(), "wide": wide, "read": read}
outs = {}
for name, fn in kernels.items():  # compiles each
    out = np.zeros((K, D), np.float32)
    fn(mem, np.arange(K, dtype=np.int64), 0, gu_n, I, x, out)
    outs[name] = torch.from_numpy(out)
err = ((outs["wide"] - outs["product"]).norm() / outs["product"].norm()).item()
print(f"wide against product: relative difference {err:.1e}")
assert err < 1e-5, "wide differs beyond float32 rounding"
g = torch.Generator().manual_seed(1)
best = {name: float("inf") for name in kernels}
out = np.zeros((K, D), np.float32)
for _ in range(4):  # rounds interleaved, so a slow spell of the host hits every kernel
    token = [torch.randperm(E * LAYERS, generator=g)[:K].numpy() for _ in range(LAYERS)]
    for name, fn in kernels.items():
        t0 = time.perf_counter()
        for rows in token:
            fn(mem, rows, 0, gu_n, I, x, out)
        best[name] = min(best[name], 1000 * (time.perf_counter() - t0) / LAYERS)
for name, ms in best.items():
    print(f"{name:>8}: {ms:.3f} ms a layer's top-{K}, {K * row_bytes / ms / 1e6:.1f} GB/s")
