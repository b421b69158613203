"""Which CPU kernel computes a layer of OLMoE's routed experts fastest from host RAM in bf16:
the CPU site's question after lab/cpu_site.py found torch's bf16 product at the speed of a
plain copy (about half the read bandwidth llama.cpp's CPU kernels reach on the same host).

OLMoE's shape: D 2048, I 1024, 64 experts in bf16, 8 a layer, each layer 8 other experts.
Ways, each one token of a layer (8 experts), outputs [8, D]:
  engine    the engine's experts_out per expert: batched [1, 1, D] products
  mv        F.linear on a [D] vector (gemv)
  mm        F.linear on a [1, D] matrix (addmm: oneDNN where the CPU has bf16 support)
  packed    oneDNN's linear on weights reordered once (mkldnn._reorder_linear_weight)
  experts   the experts side by side: 8 threads, cores / 8 each, mv in each
Prints the host's CPU flags that matter, then ms per layer of each way against the floor
(8 experts' bytes at the read rate of a plain copy).

    PYTHONPATH=. python3 lab/cpu_kernels.py [threads]
"""

import subprocess
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F

from lab.cpu_layer import E, I, K, Layer
from tuner.engine.weights.model import experts_out

layer = Layer()
threads, gate_up, down = layer.threads, layer.gate_up, layer.down
x = layer.x.to(torch.bfloat16)
flags = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
print("cpu:", [f for f in ("avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx_ne_convert")
               if f in flags], torch.backends.cpu.get_cpu_capability())


class Rows:  # the engine's Weights for one expert: matrices(dtype) -> ([1, 2I, D], [1, D, I])
    def __init__(self, e):
        self.e = e

    def matrices(self, dtype):
        return gate_up[self.e][None], down[self.e][None]


def swiglu(h):
    return F.silu(h[..., :I]) * h[..., I:]


def engine(sel):
    return torch.cat([experts_out(x, Rows(e)) for e in sel])


def mv(sel):
    return torch.stack([F.linear(swiglu(F.linear(x, gate_up[e])), down[e]) for e in sel])


x2 = x[None]


def mm(sel):
    return torch.cat([F.linear(swiglu(F.linear(x2, gate_up[e])), down[e]) for e in sel])


def packed_way():
    gu = [torch.ops.mkldnn._reorder_linear_weight(gate_up[e], 1) for e in range(E)]
    dn = [torch.ops.mkldnn._reorder_linear_weight(down[e], 1) for e in range(E)]

    def lin(a, w):
        return torch.ops.mkldnn._linear_pointwise(a, w, None, "none", [], "")

    def packed(sel):
        return torch.cat([lin(swiglu(lin(x2, gu[e])), dn[e]) for e in sel])
    return packed


pool = ThreadPoolExecutor(K)
per = max(1, threads // K)
pool_threads = list(pool.map(lambda _: torch.set_num_threads(per), range(K)))


def one(e):
    return F.linear(swiglu(F.linear(x, gate_up[e])), down[e])


def experts(sel):
    return torch.stack(list(pool.map(one, sel)))


read_gbps, floor = layer.floor()
print(f"threads {threads}, copy reads {read_gbps:.1f} GB/s, floor {floor:.3f} ms/layer")
ref = engine(list(range(K))).float()
ways = [("engine", engine), ("mv", mv), ("mm", mm), ("experts", experts)]
try:
    ways.append(("packed", packed_way()))
except RuntimeError as e:
    print("packed: not on this CPU:", str(e).splitlines()[0])
for name, fn in ways:
    err = ((fn(list(range(K))).float() - ref).norm() / ref.norm()).item()
    ms = layer.ms(fn)
    print(f"{name:>8}: {ms:.3f} ms/layer = {ms / floor:.2f} x floor, "
          f"{K * layer.expert_bytes / ms / 1e6:.1f} GB/s; 16 layers {16 * ms:.1f} ms/token; "
          f"error against engine {err:.1e}")
