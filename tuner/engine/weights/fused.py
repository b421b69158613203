"""A layer's routed experts computed straight from their rows, on CUDA: three Triton kernels.

Gathering k experts into a batch before two batched products copies every byte the
products then read (at OLMoE's shape 200 MB of memory traffic a layer for 100 MB of
weights). Here each kernel finds an expert by its row index and reads its weights once:

* `_gate_up`: for expert j (rank order) and a block of its I neurons, gate and up against x
  in float32, then silu(gate) * up, into a [k, I] float32 buffer;
* `_down`: for expert j and a block of the D outputs, its down product in float32 into a
  [k, D] buffer: one program per (block, expert), so the layer's k experts are read at once
  rather than one after another;
* `_sum`: the k down products weighted by their routing weights and summed in rank order
  in float32, so the result never depends on which expert arrived first; written in x's
  dtype.

Every path that computes routed experts on CUDA (a layer's body, its fix after misses, the
fully resident model, the quality probe's exact pass) goes through `Experts.mix`, so they
agree bit for bit; the CPU keeps the batched products (model.experts_out). Quantized
experts take the batched path on CUDA too (their dequantisation is per group).

Misses read where they are (`Far`): with every expert in page-locked host memory, a row the
device does not hold is read by the same kernels straight from host memory over the link,
at the link's speed, so a layer with misses costs its bytes and never waits for the host
to learn of them and copy them in. What the kernels read of such an expert they also write
to a landing row on the device, from which the host keeps it in the arena with a device
copy. The bytes are the same wherever they are read, so the output is too.

Shapes: D hidden, I expert width, k experts, R rows of `mem`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

try:  # the GPU image has Triton; a CPU-only install need not
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the install
    triton = tl = None  # the layer's other kernel modules import both from here

COPY_BLOCK = 4096  # elements a program of `copy_rows` copies a step
# programs a row of `copy_rows`, each striding over the row: few enough that the whole
# grid fits on the device at once beside the reading layer's attention and routing, where
# one program a block (768 for a 12.6 MB expert) queued them behind its programs
COPY_PROGRAMS = 8
SUM_BLOCK = 1024  # outputs a program of `_sum` adds up


@dataclass(frozen=True)
class Tile:
    """How a product's kernel splits its work: `n` output rows a program, `k` input
    elements a step of its loop, `warps` warps a program. `k` fixes the order of a row's
    sum, so the bits of every path's output follow from it (they share these tiles)."""

    n: int
    k: int
    warps: int


# Chosen by lab/expert_tiles.py on an H200 at OLMoE's and the demo's shapes.
GATE_UP = Tile(4, 512, 2)
DOWN = Tile(16, 256, 4)


def usable(device: torch.device, layout) -> bool:
    """Whether `mix` serves experts of this layout held on `device`."""
    return layout.quant is None and runs_on(device)


def runs_on(device: torch.device) -> bool:
    """Whether this install's Triton kernels (these and the layer's others) run on
    `device`: on CUDA, or anywhere through Triton's interpreter."""
    return triton is not None and (device.type == "cuda" or interpreted())


def interpreted() -> bool:
    """Whether Triton runs kernels in its interpreter (the CPU's tests of them)."""
    import os

    return os.environ.get("TRITON_INTERPRET") == "1"


@dataclass(frozen=True)
class Far:
    """Experts a kernel reads where they are: `mem` [F, row bytes] (page-locked host
    memory, mapped into the device's address space), `rows` int64 [k] the row of `mem` for
    each rank whose near row is negative, `land` [k, row bytes] on the device, where each
    such expert's bytes are written as the kernel reads them (so the host can keep it with
    a device copy rather than a second trip over the link). Near rows from `land_from` on
    (speculation's rows, reused a layer later) land too."""

    mem: torch.Tensor
    rows: torch.Tensor
    land: torch.Tensor
    land_from: int


def mix(mem: torch.Tensor, rows: torch.Tensor, layout, x: torch.Tensor, w: torch.Tensor,
        far: Far | None = None) -> torch.Tensor:
    """sum_j w[j] * down_j(silu(gate_j x) * up_j x) over the experts in `rows` (int64 [k],
    indices into mem [R, row bytes]); x [D], w [k] -> [D] in x's dtype. With `far`, a
    negative row reads that expert from `far.mem` instead and copies it to `far.land`."""
    parts = layout.by_name
    gate, up, down = parts["gate"], parts["up"], parts["down"]
    dtype = gate.dtype
    size = torch.empty((), dtype=dtype).element_size()
    weights = mem.view(dtype)  # [R, row bytes / size]
    I, D = gate.shape
    k = rows.shape[0]
    assert up.offset == gate.offset + gate.nbytes, "gate and up lie back to back in a row"
    a = torch.empty(k, I, dtype=torch.float32, device=x.device)
    part = torch.empty(k, D, dtype=torch.float32, device=x.device)
    y = torch.empty(D, dtype=x.dtype, device=x.device)
    # without `far` the far operands alias the near ones and are compiled out (DIRECT)
    far_w = weights if far is None else far.mem.view(dtype)
    far_rows = rows if far is None else far.rows
    land = weights if far is None else far.land.view(dtype)
    land_from = mem.shape[0] if far is None else far.land_from
    direct = far is not None
    gu, dn = GATE_UP, DOWN
    _gate_up[(k, triton.cdiv(I, gu.n))](
        weights, rows, far_w, far_rows, land, land_from, x, a, weights.shape[1],
        gate.offset // size, I, D, BN=gu.n, BK=gu.k, DIRECT=direct, num_warps=gu.warps)
    _down[(triton.cdiv(D, dn.n), k)](
        weights, rows, far_w, far_rows, land, land_from, a, part, weights.shape[1],
        down.offset // size, I, D, BN=dn.n, BK=dn.k, DIRECT=direct, num_warps=dn.warps)
    _sum[(triton.cdiv(D, SUM_BLOCK),)](part, w, y, k, D, BLOCK=SUM_BLOCK)
    return y


def copy_rows(mem: torch.Tensor, first: int, far: torch.Tensor, src: torch.Tensor) -> None:
    """mem[first + j] = far[src[j]] for every j with src[j] >= 0 (src int64 [n] on mem's
    device; far page-locked host memory), one kernel that cannot branch on the host: what
    a layer's graph issues to read the next layer's predicted experts ahead."""
    words = mem.view(torch.int32) if mem.shape[1] % 4 == 0 else mem
    src_words = far.view(words.dtype)
    n, width = src.shape[0], words.shape[1]
    _copy_rows[(n, COPY_PROGRAMS)](words, first, src_words, src, width, BLOCK=COPY_BLOCK,
                                   PROGRAMS=COPY_PROGRAMS)


def choose_ahead(scores: torch.Tensor, pred: torch.Tensor | None, ok: torch.Tensor | None,
                 table: torch.Tensor, ids: torch.Tensor, src: torch.Tensor, limit: int,
                 drop_cold: float, base: int) -> None:
    """What a layer reads ahead for the next one, in one kernel: the next layer's predicted
    experts, the top-k of `scores` [E] (its router on this input) or `pred` int64 [k]; less
    those resident (`table` [E] >= 0), all of them unless `ok` (bool [1]) and, with
    drop_cold, those of low predicted weight; the first `limit` in rank order into `ids`
    [k] (-1 after them) and their rows of the host copy (id + base) into `src`.
    device_step.choose is the same rule in torch."""
    k, E = ids.shape[0], scores.shape[0]
    _choose_ahead[(1,)](
        scores, ids if pred is None else pred, ids if ok is None else ok, table, ids, src,
        E, limit, base, float(drop_cold), K=k, KP=triton.next_power_of_2(k),
        BE=triton.next_power_of_2(E), TOPK=pred is None, HAS_OK=ok is not None,
        DROP=drop_cold > 0)


if triton is not None:

    @triton.jit
    def _choose_ahead(scores, pred, ok, table, ids, src, E, limit, base, thr, K: tl.constexpr,
                      KP: tl.constexpr, BE: tl.constexpr, TOPK: tl.constexpr,
                      HAS_OK: tl.constexpr, DROP: tl.constexpr):
        ranks = tl.arange(0, KP)
        live = ranks < K
        if TOPK:  # the top k in descending order, one argmax at a time
            offs = tl.arange(0, BE)
            work = tl.load(scores + offs, mask=offs < E, other=-float("inf"))
            p = tl.full([KP], 0, tl.int64)
            for r in tl.static_range(K):
                i = tl.argmax(work, axis=0)
                p = tl.where(ranks == r, i.to(tl.int64), p)
                work = tl.where(offs == i, -float("inf"), work)
        else:
            p = tl.load(pred + ranks, mask=live, other=0)
        wanted = live & (tl.load(table + p, mask=live, other=0) < 0)
        if HAS_OK:
            wanted = wanted & (tl.load(ok) != 0)
        if DROP:  # the softmax over the predicted scores: the predicted weights
            ps = tl.load(scores + p, mask=live, other=-float("inf")).to(tl.float64)
            e = tl.where(live, tl.exp(ps - tl.max(ps, axis=0)), 0.0)
            share = e / tl.sum(e, axis=0)
            wanted = wanted & ((share >= thr) | (ranks == tl.argmax(ps, axis=0)))
        place = tl.cumsum(wanted.to(tl.int32), axis=0) - 1  # its place among the wanted
        take = wanted & (place < limit)
        match = take[None, :] & (place[None, :] == ranks[:, None])  # [place, rank]
        got = tl.sum(tl.where(match, p[None, :], 0), axis=1)
        has = tl.sum(match.to(tl.int32), axis=1) > 0
        tl.store(ids + ranks, tl.where(has, got, -1), mask=live)
        tl.store(src + ranks, tl.where(has, got + base, -1), mask=live)

    @triton.jit
    def _row(mem, rows, far, far_rows, land_from, j, row_elems, DIRECT: tl.constexpr):
        """Expert j's row: near in `mem`, or (DIRECT, a negative row) far in `far`; and
        whether its bytes land (far, or a near row from `land_from` on)."""
        r = tl.load(rows + j)
        if DIRECT:
            return tl.where(r >= 0, mem + r * row_elems,
                            far + tl.load(far_rows + j) * row_elems), \
                (r < 0) | (r >= land_from)
        return mem + r * row_elems, r < 0

    @triton.jit
    def _gate_up(mem, rows, far, far_rows, land, land_from, x, a, row_elems, gate_off, I, D,
                 BN: tl.constexpr, BK: tl.constexpr, DIRECT: tl.constexpr):
        j = tl.program_id(0)
        n = tl.program_id(1) * BN + tl.arange(0, BN)  # [BN] neurons
        live = n < I
        row, away = _row(mem, rows, far, far_rows, land_from, j, row_elems, DIRECT)
        base = row + gate_off  # gate [I, D], then up
        kept = land + j * row_elems + gate_off
        acc_g = tl.zeros([BN], dtype=tl.float32)
        acc_u = tl.zeros([BN], dtype=tl.float32)
        for k0 in range(0, D, BK):
            d = k0 + tl.arange(0, BK)  # [BK]
            inside = d < D
            xv = tl.load(x + d, mask=inside, other=0.0).to(tl.float32)
            where = live[:, None] & inside[None, :]
            wg = tl.load(base + n[:, None] * D + d[None, :], mask=where, other=0.0)
            wu = tl.load(base + (I + n)[:, None] * D + d[None, :], mask=where, other=0.0)
            if DIRECT:
                tl.store(kept + n[:, None] * D + d[None, :], wg, mask=(where & away) != 0)
                tl.store(kept + (I + n)[:, None] * D + d[None, :], wu, mask=(where & away) != 0)
            acc_g += tl.sum(wg.to(tl.float32) * xv[None, :], axis=1)
            acc_u += tl.sum(wu.to(tl.float32) * xv[None, :], axis=1)
        act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u  # silu(gate) * up
        tl.store(a + j * I + n, act, mask=live)

    @triton.jit
    def _down(mem, rows, far, far_rows, land, land_from, a, part, row_elems, down_off, I, D,
              BN: tl.constexpr, BK: tl.constexpr, DIRECT: tl.constexpr):
        n = tl.program_id(0) * BN + tl.arange(0, BN)  # [BN] outputs
        j = tl.program_id(1)
        live = n < D
        row, away = _row(mem, rows, far, far_rows, land_from, j, row_elems, DIRECT)
        base = row + down_off  # down [D, I]
        kept = land + j * row_elems + down_off
        acc = tl.zeros([BN], dtype=tl.float32)
        for k0 in range(0, I, BK):
            i = k0 + tl.arange(0, BK)
            inside = i < I
            av = tl.load(a + j * I + i, mask=inside, other=0.0)
            where = live[:, None] & inside[None, :]
            wd = tl.load(base + n[:, None] * I + i[None, :], mask=where, other=0.0)
            if DIRECT:
                tl.store(kept + n[:, None] * I + i[None, :], wd, mask=(where & away) != 0)
            acc += tl.sum(wd.to(tl.float32) * av[None, :], axis=1)
        tl.store(part + j * D + n, acc, mask=live)

    @triton.jit
    def _sum(part, w, y, k, D, BLOCK: tl.constexpr):
        n = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = n < D
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for j in range(0, k):  # rank order: the sum never depends on arrival
            acc += tl.load(w + j) * tl.load(part + j * D + n, mask=live, other=0.0)
        tl.store(y + n, acc.to(y.dtype.element_ty), mask=live)

    @triton.jit
    def _copy_rows(mem, first, far, src, width, BLOCK: tl.constexpr, PROGRAMS: tl.constexpr):
        j = tl.program_id(0)
        row = tl.load(src + j)
        if row >= 0:
            src_row = far + row.to(tl.int64) * width
            dst_row = mem + (first + j).to(tl.int64) * width
            for start in range(tl.program_id(1) * BLOCK, width, PROGRAMS * BLOCK):
                at = start + tl.arange(0, BLOCK)
                keep = at < width
                tl.store(dst_row + at, tl.load(src_row + at, mask=keep), mask=keep)
