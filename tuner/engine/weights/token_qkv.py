"""One token's q, k and v made ready for attention in one Triton kernel, on CUDA.

After the q/k/v product, a token's attention takes the q and k norms (over each head, or
over the whole projection as OLMoE's are), clip_qkv, the rotary embedding at its position,
its keys and values written into the KV cache and the mask of the positions it sees: about
a dozen small operations in torch, each a launch that costs more than its arithmetic. Here
one program a head does all of it, reading the position on the device (so it is captured
once in a layer's graph). It rounds where torch's operations round, so it agrees with the
torch path (model.Decoder.attend_one elsewhere) to a rounding of the norm's sum.

Shapes: H query heads, G key/value heads, Dh head dim (a power of two), C context.
"""

from __future__ import annotations

import torch

from tuner.engine.weights.fused import runs_on, tl, triton

NORMS = {"": 0, "head": 1, "full": 2}  # ModelSpec.qk_norm -> the kernel's NORM
SEEN_BLOCK = 1024  # mask positions the first program writes a step


def usable(device: torch.device, head_dim: int) -> bool:
    """Whether `prepare` serves a model of this head dim on `device`."""
    return head_dim & (head_dim - 1) == 0 and runs_on(device)


def prepare(qkv: torch.Tensor, norm: str, q_norm: torch.Tensor | None,
            k_norm: torch.Tensor | None, qk_norm: torch.Tensor | None, clip: float | None,
            eps: float, cos: torch.Tensor, sin: torch.Tensor, pos: torch.Tensor,
            k_cache: torch.Tensor, v_cache: torch.Tensor, seen: torch.Tensor, span: int,
            heads: int) -> torch.Tensor:
    """qkv [(H+2G)*Dh] (a token's product); writes its keys and values at `pos` (int64 [1]
    on the device) into k_cache and v_cache [G, C, Dh] and seen[:span] (uint8: position <=
    pos); returns q [H, Dh], normed and rotated. Norm weights: `q_norm` [H*Dh] and `k_norm`
    [G*Dh] for "full", `qk_norm` [H+G, Dh] for "head"."""
    G, C, Dh = k_cache.shape
    H = heads
    q = torch.empty(H, Dh, dtype=qkv.dtype, device=qkv.device)
    full_q = q_norm if q_norm is not None else qkv  # unread unless NORM is 2
    full_k = k_norm if k_norm is not None else qkv
    per_head = qk_norm if qk_norm is not None else qkv  # unread unless NORM is 1
    _prepare[(H + 2 * G,)](
        qkv, full_q, full_k, per_head, cos, sin, pos, k_cache, v_cache, q, seen, span, C, H, G,
        0.0 if clip is None else clip, eps, DH=Dh, NORM=NORMS[norm], CLIP=clip is not None,
        FULL=triton.next_power_of_2(max(H, G) * Dh), BLOCK=SEEN_BLOCK)
    return q


if triton is not None:

    @triton.jit
    def _rounded(x, like):
        """x rounded to the dtype of `like`'s elements, as a torch operation's output is."""
        return x.to(like.dtype.element_ty).to(tl.float32)

    @triton.jit
    def _prepare(qkv, q_norm, k_norm, qk_norm, cos, sin, pos_at, k_cache, v_cache, q, seen,
                 span, C, H, G, clip, eps, DH: tl.constexpr, NORM: tl.constexpr,
                 CLIP: tl.constexpr, FULL: tl.constexpr, BLOCK: tl.constexpr):
        p = tl.program_id(0)  # heads: H of q, G of k, G of v
        pos = tl.load(pos_at)
        d = tl.arange(0, DH)
        half: tl.constexpr = DH // 2
        partner = tl.where(d < half, d + half, d - half)  # rotate-half's source
        off = p * DH
        x = tl.load(qkv + off + d).to(tl.float32)
        xp = tl.load(qkv + off + partner).to(tl.float32)
        if p < H + G:  # q or k
            if NORM == 2:  # over the whole projection, q's or k's
                is_q = p < H
                start = tl.where(is_q, 0, H * DH)
                n = tl.where(is_q, H * DH, G * DH)
                f = tl.arange(0, FULL)
                v = tl.load(qkv + start + f, mask=f < n, other=0.0).to(tl.float32)
                rstd = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / n + eps)
                if is_q:
                    w = tl.load(q_norm + off + d).to(tl.float32)
                    wp = tl.load(q_norm + off + partner).to(tl.float32)
                else:
                    w = tl.load(k_norm + off - H * DH + d).to(tl.float32)
                    wp = tl.load(k_norm + off - H * DH + partner).to(tl.float32)
                x = _rounded(x * rstd * w, qkv)
                xp = _rounded(xp * rstd * wp, qkv)
            if CLIP:
                x = tl.minimum(tl.maximum(x, -clip), clip)
                xp = tl.minimum(tl.maximum(xp, -clip), clip)
            if NORM == 1:  # over this head (the norm first rounds, then its weight)
                rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / DH + eps)
                w = tl.load(qk_norm + off + d).to(tl.float32)
                wp = tl.load(qk_norm + off + partner).to(tl.float32)
                x = _rounded(_rounded(x * rstd, qkv) * w, qkv)
                xp = _rounded(_rounded(xp * rstd, qkv) * wp, qkv)
            c = tl.load(cos + pos * DH + d).to(tl.float32)
            s = tl.load(sin + pos * DH + d).to(tl.float32)
            rot = tl.where(d < half, -xp, xp)
            out = _rounded(x * c, qkv) + _rounded(rot * s, qkv)
            if p < H:
                tl.store(q + off + d, out.to(q.dtype.element_ty))
            else:
                at = k_cache + ((p - H) * C + pos) * DH + d
                tl.store(at, out.to(k_cache.dtype.element_ty))
        else:  # v, clipped as q and k are
            if CLIP:
                x = tl.minimum(tl.maximum(x, -clip), clip)
            at = v_cache + ((p - H - G) * C + pos) * DH + d
            tl.store(at, x.to(v_cache.dtype.element_ty))
        if p == 0:
            for b in range(0, span, BLOCK):
                i = b + tl.arange(0, BLOCK)
                tl.store(seen + i, (i <= pos).to(tl.uint8), mask=i < span)
