"""A layer of OLMoE's routed experts read in place in bf16 by a numba kernel with float32
sums, against torch's fastest bf16 way (lab/cpu_kernels.py: `mm`, at the read rate of a plain
copy, about half of what llama.cpp's CPU kernels read on the same host).

The kernel (tuner/engine/weights/bf16_rows.py; call 58 ran the same loops from this script,
before they moved there) reads each expert from its row of a host copy laid out as the
engine's (gate/up then down, bf16 bits as uint16), one output row per iteration of a
parallel loop: the 8 experts' 16,384 gate/up rows, then their 16,384 down rows. Prints ms a
layer of each way, GB/s of expert bytes, and each way's error against a float32 product.

    PYTHONPATH=. python3 lab/cpu_bf16.py [threads]
"""

import numba
import numpy as np
import torch
import torch.nn.functional as F

from lab.cpu_layer import D, I, K, Layer
from tuner.engine.weights import bf16_rows

experts = bf16_rows._kernel()  # the kernel as the engine's CPU site runs it

layer = Layer()
numba.set_num_threads(layer.threads)
print(f"threads {layer.threads}, numba {numba.__version__}")
mem16, gu_n = layer.host_rows()  # laid out as the engine's host copy
x32 = layer.x.to(torch.bfloat16).float()  # the site's input arrives in bf16
xn = x32.numpy()
out = np.empty((K, D), np.float32)


def kernel(sel):
    experts(mem16, np.asarray(sel, np.int64), 0, gu_n, I, xn, out)
    return torch.from_numpy(out)


xb = x32.to(torch.bfloat16)[None]


def mm(sel):  # torch's fastest bf16 way in lab/cpu_kernels.py
    outs = []
    for e in sel:
        h = F.linear(xb, layer.gate_up[e])
        outs.append(F.linear(F.silu(h[..., :I]) * h[..., I:], layer.down[e]))
    return torch.cat(outs)


read_gbps, floor = layer.floor()
print(f"copy reads {read_gbps:.1f} GB/s, floor {floor:.3f} ms/layer")
ref = layer.exact(list(range(K)))
kernel(list(range(K)))  # compiles (or loads the cache)
numba.set_num_threads(layer.threads)
for name, fn in (("torch mm", mm), ("numba", kernel)) * 2:
    err = ((fn(list(range(K))).float() - ref).norm() / ref.norm()).item()
    ms = layer.ms(fn)
    print(f"{name:>9}: {ms:.3f} ms/layer = {ms / floor:.2f} x floor, "
          f"{K * layer.expert_bytes / ms / 1e6:.1f} GB/s; 16 layers {16 * ms:.1f} ms/token; "
          f"error against float32 {err:.1e}")
