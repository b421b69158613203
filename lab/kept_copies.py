"""What keeping a layer's misses costs the host on CUDA: the rows its kernels landed copied
into their arena rows one `copy_` a row, against one `torch._foreach_copy_` for the layer
(Arena.adopt), at the demo's and OLMoE's row sizes, k rows a layer.

    python3 lab/kept_copies.py
"""

import time

import torch

REPS = 200


def host_us(fn) -> float:
    """Host microseconds a call of `fn`, the device drained before and after each batch."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(REPS):
        fn()
    spent = time.perf_counter() - t0
    torch.cuda.synchronize()
    return 1e6 * spent / REPS


def each(mem: torch.Tensor, landing: torch.Tensor, rows: list[int]) -> None:
    for j, r in enumerate(rows):
        mem[r].copy_(landing[j])


def one(mem: torch.Tensor, landing: torch.Tensor, rows: list[int]) -> None:
    torch._foreach_copy_([mem[r] for r in rows], [landing[j] for j in range(len(rows))])


for name, row_bytes, k in (("demo", 589_824, 4), ("olmoe", 12_582_912, 8)):
    mem = torch.zeros(64, row_bytes, dtype=torch.uint8, device="cuda")
    landing = torch.ones(k, row_bytes, dtype=torch.uint8, device="cuda")
    rows = list(range(3, 3 + 5 * k, 5))
    a = host_us(lambda m=mem, s=landing, r=rows: each(m, s, r))
    b = host_us(lambda m=mem, s=landing, r=rows: one(m, s, r))
    mem.zero_()
    one(mem, landing, rows)
    same = all(bool(mem[r].eq(1).all()) for r in rows)
    print(f"{name}: {k} rows of {row_bytes} bytes, host us a layer: a copy_ each {a:.1f}, "
          f"one _foreach_copy_ {b:.1f} (copied right: {same})")
