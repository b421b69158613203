"""One token's router on CUDA in two small Triton kernels: its logits read straight from the
MoE block's 16-bit input (where torch widens the input, then runs a matrix-vector product
of two kernels), and its top k in one program (where torch.topk takes two). Every path that
routes one token on CUDA goes through these (model.Decoder.router_logits, router.select),
so they agree bit for bit; T tokens at once (prefill) and other devices keep torch's.

Shapes: E experts, D hidden.
"""

from __future__ import annotations

import torch

from tuner.engine.weights.fused import interpreted

try:  # the GPU image has Triton; a CPU-only install need not
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the install
    triton = None

ROWS = 2  # router rows a program of `_logits` computes
STEP = 512  # input elements it reads a step


def usable(t: torch.Tensor) -> bool:
    """Whether these kernels serve one token's tensor `t` (1-D, where Triton runs)."""
    return triton is not None and t.dim() == 1 and (t.device.type == "cuda" or interpreted())


def logits(routers: torch.Tensor, x: torch.Tensor, out: torch.Tensor | None = None
           ) -> torch.Tensor:
    """routers [E, D] float32 on x [D] (any float dtype), summed in float32: [E] (into
    `out` where given). A row's sum does not depend on the rows beside it, so two layers'
    routers stacked give each layer's logits bit for bit."""
    E, D = routers.shape
    if out is None:
        out = torch.empty(E, dtype=torch.float32, device=x.device)
    _logits[(triton.cdiv(E, ROWS),)](routers, x, out, E, D, ROWS=ROWS, STEP=STEP)
    return out


def top_k(scores: torch.Tensor, k: int) -> torch.Tensor:
    """The ids of the k largest of scores [E], largest first (a tie: the lower id): int64."""
    E = scores.shape[0]
    ids = torch.empty(k, dtype=torch.int64, device=scores.device)
    _top_k[(1,)](scores, ids, E, K=k, KP=triton.next_power_of_2(k),
                 BE=triton.next_power_of_2(E))
    return ids


if triton is not None:

    @triton.jit
    def _logits(routers, x, out, E, D, ROWS: tl.constexpr, STEP: tl.constexpr):
        e = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
        live = e < E
        acc = tl.zeros([ROWS], dtype=tl.float32)
        for d0 in range(0, D, STEP):
            d = d0 + tl.arange(0, STEP)
            inside = d < D
            xv = tl.load(x + d, mask=inside, other=0.0).to(tl.float32)
            w = tl.load(routers + e[:, None] * D + d[None, :],
                        mask=live[:, None] & inside[None, :], other=0.0)
            acc += tl.sum(w * xv[None, :], axis=1)
        tl.store(out + e, acc, mask=live)

    @triton.jit
    def _top_k(scores, ids, E, K: tl.constexpr, KP: tl.constexpr, BE: tl.constexpr):
        offs = tl.arange(0, BE)
        work = tl.load(scores + offs, mask=offs < E, other=-float("inf"))
        ranks = tl.arange(0, KP)
        picked = tl.full([KP], 0, tl.int64)
        taken = offs >= E
        for r in tl.static_range(K):  # the lowest id not taken that holds the maximum
            top = tl.max(tl.where(taken, -float("inf"), work), axis=0)
            i = tl.minimum(tl.min(tl.where((work == top) & ~taken, offs, BE), axis=0), E - 1)
            picked = tl.where(ranks == r, i.to(tl.int64), picked)
            taken = taken | (offs == i)
        tl.store(ids + ranks, picked, mask=ranks < K)
