"""The CPU site's kernel (tuner/engine/weights/bf16_rows.py) on the host copy of every expert
of a model, its memory made two ways in turn: torch's page-locked allocation (small pages)
and tuner/engine/memory/host_pages.py's (huge pages asked, registered with CUDA). Each
round computes a token's top-k of every layer in turn, as the engine does, on each copy;
rounds interleave the two. Prints ms a layer's top-k, GB/s of expert bytes, the process's
anonymous huge pages, whether each copy is page-locked and its upload rate to the GPU (a
page-locked copy's is the link's).

    python3 lab/host_pages.py MODEL_FOLDER [rounds]
"""

import sys
import time
from pathlib import Path

import tuner  # noqa: F401  before torch: OpenMP's spin beside a GPU (tuner/openmp.py)

# isort: split
import torch

from tuner.engine.memory import host_pages
from tuner.engine.memory.host_copy import HostCopy
from tuner.engine.weights import bf16_rows
from tuner.engine.weights.checkpoint import Checkpoint

ckpt = Checkpoint(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
mc = ckpt.config
L, E, K, D = mc.num_layers, mc.num_experts, mc.top_k, mc.hidden_size
cuda = torch.cuda.is_available()
huge = HostCopy(ckpt, pin=cuda).mem  # host_pages.zeros
small = torch.empty(huge.shape, dtype=torch.uint8, pin_memory=cuda)
small.copy_(huge)
copies = {"small pages (torch)": small, "huge pages (host_pages)": huge}
kernels = {name: bf16_rows.load(mem, ckpt.layout) for name, mem in copies.items()}
assert all(kernels.values()), "the kernel needs numba and a bf16 model"


def anon_huge() -> str:
    rollup = Path("/proc/self/smaps_rollup")
    lines = [ln for ln in rollup.read_text().splitlines() if ln.startswith("AnonHugePages")] \
        if rollup.exists() else []
    return " ".join(lines[0].split()[1:]) if lines else "?"


def upload_gbps(mem: torch.Tensor) -> float:
    """GB/s of a layer's top-k rows copied to the GPU, each row one asynchronous copy."""
    dev = torch.empty(K, mem.shape[1], dtype=torch.uint8, device="cuda")
    rows = torch.randperm(mem.shape[0], generator=g)[:K].tolist()
    for j, r in enumerate(rows):  # warm
        dev[j].copy_(mem[r], non_blocking=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(8):
        for j, r in enumerate(rows):
            dev[j].copy_(mem[r], non_blocking=True)
    torch.cuda.synchronize()
    return 8 * K * mem.shape[1] / (time.perf_counter() - t0) / 1e9


g = torch.Generator().manual_seed(0)
x = torch.randn(D, generator=g).to(torch.bfloat16).float()
print(f"{L} layers x {E} experts, top-{K}, {ckpt.row_bytes} bytes a row, host copy "
      f"{huge.numel() / 1e9:.1f} GB each; anonymous huge pages {anon_huge()}")
for name, mem in copies.items():
    line = f"{name}: page-locked {mem.is_pinned()}, starts {mem.data_ptr() % host_pages.HUGE}" \
           " bytes past a 2 MiB boundary"
    if cuda:
        line += f", uploads {upload_gbps(mem):.1f} GB/s"
    print(line)
same = torch.equal(kernels["small pages (torch)"]([0, 1], x),
                   kernels["huge pages (host_pages)"]([0, 1], x))
print(f"same outputs from both copies: {same}")
best = {name: float("inf") for name in copies}
for _ in range(rounds):
    token = [[l * E + e for e in torch.randperm(E, generator=g)[:K].tolist()] for l in range(L)]
    for name, kernel in kernels.items():
        t0 = time.perf_counter()
        for rows in token:
            kernel(rows, x)
        best[name] = min(best[name], 1000 * (time.perf_counter() - t0) / L)
for name, ms in best.items():
    print(f"{name:>24}: {ms:.3f} ms a layer's top-k (fastest of {rounds} rounds), "
          f"{K * ckpt.row_bytes / ms / 1e6:.1f} GB/s")
