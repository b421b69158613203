"""How fast a host's cores compute a layer's routed experts from host memory (the CPU site
of `cpu_pool`), three ways, against the bytes over the host's copy bandwidth.

OLMoE's shape: D 2048, I 1024, 64 experts in bf16 (12.6 MB each), 8 a layer, read from
memory (each layer takes 8 other experts, so no cache holds them). Ways:
  today   gather the 8 rows into a batch, widen to float32, two batched products
  widen   each expert widened to float32 from its row, no gather
  bf16    each expert computed in bf16 from its row (float32 accumulation in the kernel)
Prints ms per layer of each way and of the floor (8 experts' bytes over a plain copy).
From the repository's root:

    PYTHONPATH=. python3 lab/cpu_site.py [threads]
"""

import torch
import torch.nn.functional as F

from lab.cpu_layer import D, I, K, Layer

layer = Layer()
threads, gate_up, down, x = layer.threads, layer.gate_up, layer.down, layer.x


def today(sel):
    gu, dn = gate_up[sel].float(), down[sel].float()
    h = torch.bmm(x.view(1, 1, D).expand(K, 1, D), gu.transpose(1, 2))
    a = F.silu(h[..., :I]) * h[..., I:]
    return torch.bmm(a, dn.transpose(1, 2)).view(K, D)


def widen(sel):
    out = []
    for e in sel:
        h = F.linear(x, gate_up[e].float())
        out.append(F.linear(F.silu(h[:I]) * h[I:], down[e].float()))
    return torch.stack(out)


def bf16(sel):
    xb, out = x.to(torch.bfloat16), []
    for e in sel:
        h = F.linear(xb, gate_up[e]).float()
        out.append(F.linear((F.silu(h[:I]) * h[I:]).to(torch.bfloat16), down[e]).float())
    return torch.stack(out)


read_gbps, floor = layer.floor()
ref = today(list(range(K)))
err = {n: ((f(list(range(K))) - ref).norm() / ref.norm()).item()
       for n, f in (("widen", widen), ("bf16", bf16))}
print(f"threads {threads}, copy {2 * read_gbps:.1f} GB/s (read + write), floor "
      f"{floor:.3f} ms/layer; relative error against today: {err}")
for name, fn in (("today", today), ("widen", widen), ("bf16", bf16)):
    ms = layer.ms(fn)
    print(f"{name:>6}: {ms:.3f} ms/layer = {ms / floor:.2f} x floor; 16 layers "
          f"{16 * ms:.1f} ms/token")
