"""Variants of the CPU site's bf16 expert kernel (tuner/engine/weights/bf16_rows.py) against
it, on a layer of OLMoE's routed experts (lab/cpu_layer.py; host copy laid out as in
lab/cpu_bf16.py: one row an expert, gate/up [2I, D] then down [D, I], bf16 bits as uint16).

On the H200 host's 16 cores (call 63) the kernel of one output row an iteration (`row`
here) read 71 GB/s; four rows an iteration read 88-90 (`rows4`, `fused`), and those read in
pairs of bf16 as uint32 100.6 GB/s: the product kernel is that one now. llama.cpp's CPU
kernels read about 90 there. Same signature as the product kernel:

  row      one output row an iteration, the activations in a serial loop (the kernel
           before call 63)
  rows4    4 output rows an iteration (gate/up and down): each x load serves 4 rows, 4
           streams in flight a thread; the serial activation loop kept
  fused    an iteration computes gate rows o, o+1 and up rows o, o+1 and their activation,
           writing a[j, o] directly: no serial loop, no h buffer; down as rows4
  dynamic  the product kernel scheduled dynamically (chunks of 8 iterations) instead of one
           fixed share a thread, so one slow core does not hold up the layer
  thp      the product kernel on a copy of the experts in memory that asks for
           transparent huge pages (madvise): a 4 KiB page a row costs a page walk each

Prints, for each, ms a layer (fastest of 3 interleaved rounds), GB/s of expert bytes, the
relative error against a float32 product and against the product kernel (must be < 1e-5:
only float32 rounding differs), and the FMAs in its machine code.

    PYTHONPATH=. python3 lab/cpu_bf16_variants.py [threads]
"""

import mmap
import re
from pathlib import Path

import numba
import numpy as np
import torch

from lab.cpu_layer import D, I, K, Layer
from tuner.engine.weights import bf16_rows

jit = numba.njit(parallel=True, fastmath=True, nogil=True, cache=False)
inline = numba.njit(inline="always", fastmath=True)


@inline
def bf16(u):  # a bf16's bits are a float32's upper half
    return np.uint32(np.uint32(u) << 16).view(np.float32)


@inline
def silu_mul(g, u):
    return g / (np.float32(1.0) + np.exp(-g)) * u


@inline
def dot4(w0, w1, w2, w3, v):
    """Four bf16 rows (slices, so LLVM sees unit strides from 0) dotted with v."""
    a0 = a1 = a2 = a3 = np.float32(0.0)
    for i in range(v.shape[0]):
        vi = v[i]
        a0 += bf16(w0[i]) * vi
        a1 += bf16(w1[i]) * vi
        a2 += bf16(w2[i]) * vi
        a3 += bf16(w3[i]) * vi
    return a0, a1, a2, a3


@inline
def rows(w, s, n):  # the four rows of n from s
    return w[s:s + n], w[s + n:s + 2 * n], w[s + 2 * n:s + 3 * n], w[s + 3 * n:s + 4 * n]


@jit
def down4(mem, rows_, down, inter, a, out):
    """Four down rows an iteration (rows4 and fused)."""
    k, d = rows_.shape[0], out.shape[1]
    for t in numba.prange(k * d // 4):
        j, o = t // (d // 4), t % (d // 4) * 4
        w0, w1, w2, w3 = rows(mem[rows_[j]], down + o * inter, inter)
        out[j, o], out[j, o + 1], out[j, o + 2], out[j, o + 3] = dot4(w0, w1, w2, w3, a[j])


@jit
def rows4(mem, rows_, gate_up, down, inter, x, out):
    k, d, two_i = rows_.shape[0], x.shape[0], 2 * inter
    h = np.empty((k, two_i), np.float32)
    for t in numba.prange(k * two_i // 4):
        j, o = t // (two_i // 4), t % (two_i // 4) * 4
        w0, w1, w2, w3 = rows(mem[rows_[j]], gate_up + o * d, d)
        h[j, o], h[j, o + 1], h[j, o + 2], h[j, o + 3] = dot4(w0, w1, w2, w3, x)
    a = np.empty((k, inter), np.float32)
    for j in range(k):
        for i in range(inter):
            a[j, i] = silu_mul(h[j, i], h[j, inter + i])
    down4(mem, rows_, down, inter, a, out)


@jit
def fused(mem, rows_, gate_up, down, inter, x, out):
    k, d, half = rows_.shape[0], x.shape[0], inter // 2
    a = np.empty((k, inter), np.float32)
    for t in numba.prange(k * half):
        j, o = t // half, t % half * 2
        w, g = mem[rows_[j]], gate_up + o * d
        u = g + inter * d  # up row o: gate's I rows further on
        g0, g1, u0, u1 = dot4(w[g:g + d], w[g + d:g + 2 * d], w[u:u + d], w[u + d:u + 2 * d], x)
        a[j, o], a[j, o + 1] = silu_mul(g0, u0), silu_mul(g1, u1)
    down4(mem, rows_, down, inter, a, out)


@jit
def row(mem, rows_, gate_up, down, inter, x, out):
    k, d, two_i = rows_.shape[0], x.shape[0], 2 * inter
    h = np.empty((k, two_i), np.float32)
    for t in numba.prange(k * two_i):
        j, o = t // two_i, t % two_i
        w = mem[rows_[j], gate_up + o * d:gate_up + (o + 1) * d]
        acc = np.float32(0.0)
        for i in range(d):
            acc += bf16(w[i]) * x[i]
        h[j, o] = acc
    a = np.empty((k, inter), np.float32)
    for j in range(k):
        for i in range(inter):
            a[j, i] = silu_mul(h[j, i], h[j, inter + i])
    for t in numba.prange(k * d):
        j, o = t // d, t % d
        w = mem[rows_[j], down + o * inter:down + (o + 1) * inter]
        acc = np.float32(0.0)
        for i in range(inter):
            acc += bf16(w[i]) * a[j, i]
        out[j, o] = acc


def chunked(kernel, chunk):
    """The kernel with its parallel loops handed out `chunk` iterations at a time."""
    def run(*args):
        old = numba.set_parallel_chunksize(chunk)
        try:
            kernel(*args)
        finally:
            numba.set_parallel_chunksize(old)
    run.inspect_asm = kernel.inspect_asm
    return run


def fmas(fn) -> str:
    """The packed FMAs in fn's machine code by register width (ymm: 8 floats, zmm: 16)."""
    try:
        asm = "\n".join(fn.inspect_asm().values())
    except Exception:  # a kernel loaded from numba's disk cache keeps no asm
        return "?"
    found = re.findall(r"vfmadd\w*ps\s[^\n]*%([xyz]mm)", asm)
    return " ".join(f"{r}x{found.count(r)}" for r in ("xmm", "ymm", "zmm") if r in found)


layer = Layer()
numba.set_num_threads(layer.threads)
print(f"threads {layer.threads}, numba {numba.__version__}")
mem16, gu_n = layer.host_rows()  # laid out as the engine's host copy
# the same bytes where the kernel may take 2 MiB pages (torch's allocations do not ask)
huge = mmap.mmap(-1, mem16.nbytes + (2 << 20))
huge.madvise(mmap.MADV_HUGEPAGE)
mem_thp = np.frombuffer(huge, np.uint16, count=mem16.size).reshape(mem16.shape)
mem_thp[:] = mem16
thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
rollup = Path("/proc/self/smaps_rollup")
anon = [ln for ln in rollup.read_text().splitlines() if ln.startswith("AnonHugePages")] \
    if rollup.exists() else []
print(f"transparent huge pages: {thp.read_text().strip() if thp.exists() else '?'}; "
      f"{' '.join(anon[0].split()[1:]) if anon else '?'} of anonymous huge pages")
x32 = layer.x.to(torch.bfloat16).float()  # the site's input arrives in bf16
xn = x32.numpy()

product = bf16_rows._kernel()
variants = {"product": product, "row": row, "rows4": rows4, "fused": fused,
            "dynamic": chunked(product, 8), "thp": product}


def way(kernel, name=""):
    src = mem_thp if name == "thp" else mem16

    def run(sel):
        out = np.empty((K, D), np.float32)
        kernel(src, np.asarray(sel, np.int64), 0, gu_n, I, xn, out)
        return torch.from_numpy(out)
    return run


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


read_gbps, floor = layer.floor()
print(f"copy reads {read_gbps:.1f} GB/s, floor {floor:.3f} ms/layer")
sel = list(range(K))
ref = layer.exact(sel)
outs = {name: way(fn, name)(sel) for name, fn in variants.items()}  # compiles each
print(f"threading layer {numba.threading_layer()}")  # workqueue, omp or tbb
numba.set_num_threads(layer.threads)
errs = {name: (rel(o, ref), rel(o, outs["product"])) for name, o in outs.items()}
best = {name: float("inf") for name in variants}
for _ in range(3):  # rounds interleaved, so a slow spell of the host hits every variant
    for name, fn in variants.items():
        best[name] = min(best[name], layer.ms(way(fn, name)))

print(f"{'variant':>8} {'ms/layer':>9} {'GB/s':>6} {'x floor':>7} {'err f32':>8} "
      f"{'err prod':>8}  FMAs")
for name, ms in best.items():
    e_ref, e_prod = errs[name]
    print(f"{name:>8} {ms:9.3f} {K * layer.expert_bytes / ms / 1e6:6.1f} {ms / floor:7.2f} "
          f"{e_ref:8.1e} {e_prod:8.1e}  {fmas(variants[name])}")
    assert e_ref < 1e-5 and e_prod < 1e-5, f"{name} differs beyond float32 rounding"
win = min(best, key=best.get)
print(f"fastest: {win}, {best['product'] / best[win]:.2f}x the product kernel "
      f"({best[win]:.3f} against {best['product']:.3f} ms/layer)")
