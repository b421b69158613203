"""One token's router on CUDA in small Triton kernels: its logits read straight from the
MoE block's 16-bit input (where torch widens the input, then runs a matrix-vector product
of two kernels), its top k in one program (where torch.topk takes two) and its routing
weights in one (a gather and a softmax); a layer's body on the device takes top k, weights
and the table lookup of their rows in one (`route`). Every path that routes one token on
CUDA goes through these (model.Decoder.router_logits, router.select, router.weights), so
they agree bit for bit; T tokens at once (prefill) and other devices keep torch's.

Shapes: E experts, D hidden.
"""

from __future__ import annotations

import torch

from tuner.engine.weights.fused import runs_on, tl, triton

ROWS = 2  # router rows a program of `_logits` computes
STEP = 512  # input elements it reads a step


def usable(t: torch.Tensor) -> bool:
    """Whether these kernels serve one token's tensor `t` (1-D, where Triton runs)."""
    return t.dim() == 1 and runs_on(t.device)


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


def weights(logits: torch.Tensor, sel: torch.Tensor, normalise: bool) -> torch.Tensor:
    """The routing weights [k] float32 of experts `sel` (int64 [k]) from logits [E]: the
    softmax over the selected (`normalise`) or over all E, as router.weights."""
    E, k = logits.shape[0], sel.shape[0]
    w = torch.empty(k, dtype=torch.float32, device=logits.device)
    _weights[(1,)](logits, sel, w, E, K=k, KP=triton.next_power_of_2(k),
                   BE=triton.next_power_of_2(E), NORMALISE=normalise)
    return w


Spec = tuple[torch.Tensor, int, int, torch.Tensor]


def route(logits: torch.Tensor, table: torch.Tensor, k: int, normalise: bool,
          w: torch.Tensor, pack: torch.Tensor, spec: Spec | None = None
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """A layer's plain top-k routing in one kernel: the selected ids `sel` and their rows
    `table[sel]` (int64 [k] each, returned), their weights into `w` [k] (as `weights`), and
    both as float32 into pack [2k] (ids, then rows), as a layer's body packs them.

    `spec` (src, spec_first, base, named), where the layer before read misses ahead: a
    missing expert that the set `src` [k] names (as far row base + expert) at place j gets
    row spec_first + j (device_step.ahead_rows), and the set goes into `named` [k]
    (float32), all in the same kernel: a layer that reads ahead takes no more operations
    than one that does not."""
    E = logits.shape[0]
    sel = torch.empty(k, dtype=torch.int64, device=logits.device)
    rows = torch.empty_like(sel)
    src, first, base, named = spec if spec is not None else (sel, 0, 0, pack)
    _route[(1,)](logits, table, sel, rows, w, pack, src, first, base, named, E, K=k,
                 KP=triton.next_power_of_2(k), BE=triton.next_power_of_2(E),
                 NORMALISE=normalise, SPEC=spec is not None)
    return sel, rows


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
    def _pick(scores, E, K: tl.constexpr, KP: tl.constexpr, BE: tl.constexpr):
        """The k largest of scores [E], largest first: [KP] ids (0 past K)."""
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
        return picked

    @triton.jit
    def _weights_of(logits, picked, E, K: tl.constexpr, KP: tl.constexpr, BE: tl.constexpr,
                    NORMALISE: tl.constexpr):
        """The softmax weights of the experts `picked` [KP] (the first K live)."""
        live = tl.arange(0, KP) < K
        mine = tl.load(logits + picked, mask=live, other=-float("inf"))
        if NORMALISE:  # over the selected
            top = tl.max(mine, axis=0)
            e = tl.where(live, tl.exp(mine - top), 0.0)
            return e / tl.sum(e, axis=0)
        offs = tl.arange(0, BE)  # over all E, then the selected's shares
        every = tl.load(logits + offs, mask=offs < E, other=-float("inf"))
        top = tl.max(every, axis=0)
        total = tl.sum(tl.where(offs < E, tl.exp(every - top), 0.0), axis=0)
        return tl.where(live, tl.exp(mine - top), 0.0) / total

    @triton.jit
    def _top_k(scores, ids, E, K: tl.constexpr, KP: tl.constexpr, BE: tl.constexpr):
        ranks = tl.arange(0, KP)
        tl.store(ids + ranks, _pick(scores, E, K, KP, BE), mask=ranks < K)

    @triton.jit
    def _weights(logits, sel, w, E, K: tl.constexpr, KP: tl.constexpr, BE: tl.constexpr,
                 NORMALISE: tl.constexpr):
        ranks = tl.arange(0, KP)
        picked = tl.load(sel + ranks, mask=ranks < K, other=0)
        tl.store(w + ranks, _weights_of(logits, picked, E, K, KP, BE, NORMALISE),
                 mask=ranks < K)

    @triton.jit
    def _route(logits, table, sel, rows, w, pack, src, first, base, named, E,
               K: tl.constexpr, KP: tl.constexpr, BE: tl.constexpr, NORMALISE: tl.constexpr,
               SPEC: tl.constexpr):
        ranks = tl.arange(0, KP)
        live = ranks < K
        picked = _pick(logits, E, K, KP, BE)
        found = tl.load(table + picked, mask=live, other=-1)
        if SPEC:  # [rank, place]: the first place of the set naming the rank's expert
            s = tl.load(src + ranks, mask=live, other=-1)
            tl.store(named + ranks, s.to(tl.float32), mask=live)
            match = (picked[:, None] + base == s[None, :]) & live[None, :]
            place = tl.min(tl.where(match, ranks[None, :], KP), axis=1)
            found = tl.where((found < 0) & (place < KP), first + place, found)
        tl.store(sel + ranks, picked, mask=live)
        tl.store(rows + ranks, found, mask=live)
        tl.store(w + ranks, _weights_of(logits, picked, E, K, KP, BE, NORMALISE), mask=live)
        tl.store(pack + ranks, picked.to(tl.float32), mask=live)
        tl.store(pack + K + ranks, found.to(tl.float32), mask=live)
