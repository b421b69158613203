"""How fast a host's cores compute a layer's routed experts from host memory (the CPU site
of `cpu_pool`), three ways, against the bytes over the host's copy bandwidth.

OLMoE's shape: D 2048, I 1024, 64 experts in bf16 (12.6 MB each), 8 a layer, read from
memory (each layer takes 8 other experts, so no cache holds them). Ways:
  today   gather the 8 rows into a batch, widen to float32, two batched products
  widen   each expert widened to float32 from its row, no gather
  bf16    each expert computed in bf16 from its row (float32 accumulation in the kernel)
Prints ms per layer of each way and of the floor (8 experts' bytes over a plain copy).

    python3 lab/cpu_site.py [threads]
"""

import sys
import time

import torch
import torch.nn.functional as F

D, I, E, K = 2048, 1024, 64, 8
threads = int(sys.argv[1]) if len(sys.argv) > 1 else torch.get_num_threads()
torch.set_num_threads(threads)
g = torch.Generator().manual_seed(0)
gate_up = (torch.randn(E, 2 * I, D, generator=g) * 0.02).to(torch.bfloat16)
down = (torch.randn(E, D, I, generator=g) * 0.02).to(torch.bfloat16)
x = torch.randn(D, generator=g)
expert_bytes = (gate_up[0].numel() + down[0].numel()) * 2


def today(sel):
    gu, dn = gate_up[sel].float(), down[sel].float()
    h = torch.bmm(x.view(1, 1, D).expand(K, 1, D), gu.transpose(1, 2))
    a = F.silu(h[..., :I]) * h[..., I:]
    return torch.bmm(a, dn.transpose(1, 2)).view(K, D)


def widen(sel):
    out = []
    for e in sel.tolist():
        h = F.linear(x, gate_up[e].float())
        out.append(F.linear(F.silu(h[:I]) * h[I:], down[e].float()))
    return torch.stack(out)


def bf16(sel):
    xb, out = x.to(torch.bfloat16), []
    for e in sel.tolist():
        h = F.linear(xb, gate_up[e]).float()
        out.append(F.linear((F.silu(h[:I]) * h[I:]).to(torch.bfloat16), down[e]).float())
    return torch.stack(out)


def timed(fn, reps=24):
    sels = [torch.randperm(E, generator=g)[:K] for _ in range(reps)]
    fn(sels[0])
    t0 = time.perf_counter()
    for sel in sels:
        fn(sel)
    return 1000 * (time.perf_counter() - t0) / reps


src = torch.empty(1 << 30, dtype=torch.uint8).fill_(1)
dst = torch.empty_like(src)
dst.copy_(src)
t0 = time.perf_counter()
for _ in range(4):
    dst.copy_(src)
copy_gbps = 4 * 2 * src.numel() / (time.perf_counter() - t0) / 1e9  # read + write
ref = today(torch.arange(K))
err = {n: ((f(torch.arange(K)) - ref).norm() / ref.norm()).item()
       for n, f in (("widen", widen), ("bf16", bf16))}
floor = 1000 * K * expert_bytes / (copy_gbps / 2 * 1e9)  # the bytes read once
print(f"threads {threads}, copy {copy_gbps:.1f} GB/s (read + write), floor "
      f"{floor:.3f} ms/layer; relative error against today: {err}")
for name, fn in (("today", today), ("widen", widen), ("bf16", bf16)):
    ms = timed(fn)
    print(f"{name:>6}: {ms:.3f} ms/layer = {ms / floor:.2f} x floor; 16 layers "
          f"{16 * ms:.1f} ms/token")
