"""The MoE decoder for Hugging Face MoE checkpoints, one token at a time, with experts
supplied by the caller: Qwen3-MoE, Qwen2-MoE (with its shared expert), OLMoE and Mixtral.

Dense weights (embeddings, attention, norms, routers, shared experts, LM head) are small and
held whole on the compute device. Routed expert weights never live here: the decode loop
computes the selected experts from their rows (the arena, link staging or the host copy)
through experts.py: fused kernels that read each row on CUDA, else one gathered batch that
`experts_out` computes together: two batched matrix products and one activation for the
whole batch, whatever k is.

The model computes in `compute_dtype`: the checkpoint's dtype on CUDA, float32 on the CPU.
Torch's CPU kernels for one token's matrix-vector products are several times slower in
bfloat16 than in float32 (on a 2-core AMD EPYC with AVX512-BF16, the bf16 demo model ran at
158 ms a token computing in bfloat16 and at 31 in float32), so on the CPU 16-bit weights
are widened as they are gathered, into buffers kept for it (Wide): the store, the arena
and memory bandwidth still carry 16 bits per weight. Norms and attention accumulate in
float32 and routers are kept in float32, so routing does not hinge on 16-bit rounding of
its logits. On CUDA one token's layer is about twenty kernels (q, k and v in one product
and readied for attention in one more: token_qkv.py; one attention kernel; the router in
two: router_kernels.py; the experts in three: fused.py), because at one token a launch
costs more than most of the kernels it launches.

Shapes: D hidden, H query heads, G key/value heads, Dh head dim, E experts, I expert width,
V vocabulary, C context (KV cache length), k experts in a batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from tuner.engine.weights import router_kernels, token_qkv
from tuner.engine.weights.quant import Quant, dequantize
from tuner.vocabulary.model_config import ModelConfig

# Devices where one token's attention has fixed shapes (its position a device tensor), so a
# layer's step can be captured once and replayed: CUDA graphs. The same code runs eagerly
# anywhere, which is how the CPU tests check it.
FIXED_SHAPES = {"cuda"}


def compute_dtype(weights: torch.dtype, device: torch.device) -> torch.dtype:
    """The dtype the model computes in for weights stored in `weights`."""
    return weights if device.type == "cuda" else torch.float32


def _linear(w: torch.Tensor, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """w [O, D] applied to one token x [D] (a matrix-vector product) or to T tokens [T, D]."""
    y = w @ x if x.dim() == 1 else x @ w.T
    return y if bias is None else y + bias


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Over the last dimension (torch's fused kernel, which accumulates in float32); `w` of
    the last dimension's size, or of x's shape (several norms side by side)."""
    if w.shape == x.shape[-1:]:
        return F.rms_norm(x, w.shape, w, eps)
    return F.rms_norm(x, x.shape[-1:], eps=eps) * w


@dataclass(frozen=True)
class Weights:
    """The matrices of a batch of k experts: gate and up stacked as `gate_up` [k, 2I, D],
    `down` [k, D, I]. Quantized (`quant`): the packed integers in those two fields, and
    their per-group scales beside them (layout in quant.py)."""

    gate_up: torch.Tensor
    down: torch.Tensor
    gate_up_scales: torch.Tensor | None = None
    down_scales: torch.Tensor | None = None
    quant: Quant | None = None

    def matrices(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(gate_up, down) as `dtype` matrices."""
        q = self.quant
        if q is None:  # widened only where they are stored narrower (the CPU)
            if self.gate_up.dtype == dtype:
                return self.gate_up, self.down
            return self.gate_up.to(dtype), self.down.to(dtype)
        assert self.gate_up_scales is not None and self.down_scales is not None  # quantized
        return (dequantize(self.gate_up, self.gate_up_scales, q, dtype),
                dequantize(self.down, self.down_scales, q, dtype))


def widens(rows: Weights, dtype: torch.dtype) -> bool:
    """Whether experts stored as `rows` are widened to be computed in `dtype` (not quantized
    ones: dequantizing makes new tensors anyway)."""
    return rows.quant is None and rows.gate_up.dtype != dtype


Matrices = tuple[torch.Tensor, torch.Tensor]  # one expert's gate_up [2I, D], down [D, I]


def by_row(w: Weights) -> list[Matrices]:
    """Each expert's matrices of an unquantized batch, as views made once: a gather row by
    row then indexes no tensor (each indexing is an operation of its own on the CPU)."""
    return list(zip(w.gate_up.unbind(0), w.down.unbind(0)))


class Wide:
    """Buffers a caller keeps to gather its expert batches into, widened (bf16 rows computed
    in float32 on the CPU), each expert straight from its row: a fresh tensor of megabytes a
    layer costs its page faults every time, several times the widening, and a byte copy of
    the batch first would move every byte twice more. Grown to the largest batch seen."""

    def __init__(self) -> None:
        self._rows: list[Matrices] = []  # the buffers' rows
        self._batches: list[Weights] = []  # their first n rows, by n

    def gather(self, rows: list[Matrices], dtype: torch.dtype) -> Weights:
        """The experts whose matrices `rows` are, in that order, as a batch in `dtype`."""
        n = len(rows)
        if len(self._rows) < n or self._rows[0][0].dtype != dtype:
            gate_up, down = rows[0]
            # ordinary tensors even when first made inside inference mode: written in place
            # by any later gather, inside it or not
            with torch.inference_mode(False):
                bufs = Weights(
                    torch.empty((n, *gate_up.shape), dtype=dtype, device=gate_up.device),
                    torch.empty((n, *down.shape), dtype=dtype, device=down.device))
            self._rows = by_row(bufs)
            self._batches = [Weights(bufs.gate_up[:m], bufs.down[:m]) for m in range(n + 1)]
        for (gate_up, down), (src_gate_up, src_down) in zip(self._rows, rows):
            gate_up.copy_(src_gate_up)
            down.copy_(src_down)
        return self._batches[n]


def experts_out(x: torch.Tensor, w: Weights) -> torch.Tensor:
    """SwiGLU experts, the whole batch at once. One token x [D] -> [k, D], row j from
    expert j; or each expert on tokens of its own, x [k, T, D] -> [k, T, D] (prefill).

    Both products are batched row-vector times matrix ([1, D] @ [D, 2I] per expert) for one
    token: on the CPU that is a fast kernel per batch entry whose result does not depend on
    the batch (so an expert gives the same bits whichever batch and site computed it); on
    CUDA it is one strided-batched cuBLAS call. With T tokens each entry is a [T, D] matrix
    product instead."""
    gate_up, down = w.matrices(x.dtype)
    k, two_i, D = gate_up.shape
    xs = x.view(1, 1, D).expand(k, 1, D) if x.dim() == 1 else x  # [k, T, D]
    h = torch.bmm(xs, gate_up.transpose(1, 2))  # [k, T, 2I]
    a = F.silu(h[..., : two_i // 2]) * h[..., two_i // 2:]  # [k, T, I]
    out = torch.bmm(a, down.transpose(1, 2))  # [k, T, D]
    return out.view(k, D) if x.dim() == 1 else out


@dataclass(frozen=True)
class LayerWeights:
    """One layer's dense weights on the compute device."""

    in_norm: torch.Tensor
    post_norm: torch.Tensor
    qkv: torch.Tensor  # one product for q, k and v: [(H+2G)*Dh, D]
    qkv_bias: torch.Tensor | None
    o: torch.Tensor  # [D, H*Dh]
    q_norm: torch.Tensor | None  # [Dh] per head, or [H*Dh] (full)
    k_norm: torch.Tensor | None
    qk_norm: torch.Tensor | None  # per head: q's and k's weights side by side, one norm
    shared: Weights | None  # Qwen2-MoE's shared expert
    shared_gate: torch.Tensor | None  # [1, D]


class Decoder:
    """Dense parts of the model plus a KV cache for one sequence of up to C tokens."""

    def __init__(self, cfg: ModelConfig, dense: dict[str, torch.Tensor], context: int,
                 device: torch.device, dtype: torch.dtype = torch.float32):
        self.cfg = cfg
        self.device = device
        self.dtype = dtype
        w = {k: v.to(device=device, dtype=dtype) for k, v in dense.items()}
        self.embed = w["model.embed_tokens.weight"]  # [V, D]
        self.final_norm = w["model.norm.weight"]
        self.lm_head = w.get("lm_head.weight", self.embed)  # [V, D]
        L, H, G, Dh = cfg.num_layers, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.layers: list[LayerWeights] = []
        for layer in range(L):
            p = f"model.layers.{layer}."
            a = p + "self_attn."
            parts = [w[a + f"{n}_proj.weight"] for n in "qkv"]  # [H*Dh | G*Dh | G*Dh, D]
            biases = [w.get(a + f"{n}_proj.bias") for n in "qkv"]
            q_norm, k_norm = w.get(a + "q_norm.weight"), w.get(a + "k_norm.weight")
            self.layers.append(LayerWeights(
                in_norm=w[p + "input_layernorm.weight"],
                post_norm=w[p + "post_attention_layernorm.weight"],
                qkv=torch.cat(parts),
                qkv_bias=None if all(b is None for b in biases) else torch.cat(
                    [b if b is not None else t.new_zeros(len(t)) for b, t in zip(biases, parts)]),
                o=w[a + "o_proj.weight"],
                q_norm=q_norm,
                k_norm=k_norm,
                qk_norm=torch.cat([w[a + "q_norm.weight"].expand(H, Dh),
                                   w[a + "k_norm.weight"].expand(G, Dh)])
                if cfg.spec.qk_norm == "head" else None,
                shared=_shared_expert(w, p + "mlp.shared_expert."),
                shared_gate=w.get(p + "mlp.shared_expert_gate.weight"),
            ))
        # Routers stacked so a predictor can apply layer l+1's router to layer l's input.
        self.routers = torch.stack([dense[cfg.router_key(i)] for i in range(L)]).to(
            device=device, dtype=torch.float32)  # [L, E, D]
        self.context = context
        G, Dh = cfg.num_kv_heads, cfg.head_dim
        self.k_cache = torch.zeros(L, G, context, Dh, device=device, dtype=self.dtype)
        self.v_cache = torch.zeros(L, G, context, Dh, device=device, dtype=self.dtype)
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, Dh, 2, dtype=torch.float64) / Dh))
        ang = torch.arange(context, dtype=torch.float64)[:, None] * inv[None, :]  # [C, Dh/2]
        ang = torch.cat([ang, ang], dim=-1)  # [C, Dh], both halves
        self.cos = ang.cos().to(device, self.dtype)
        self.sin = ang.sin().to(device, self.dtype)
        # One token on CUDA attends over a fixed span of the cache with the position on the
        # device, so a layer's step has static shapes and can be a CUDA graph; every caller
        # of one token takes this path there, so its logits agree bit for bit.
        self.fixed = device.type in FIXED_SHAPES
        self.positions = torch.arange(context, device=device)  # [C]
        self._pos = torch.zeros(1, dtype=torch.int64, device=device)  # eager callers' pos
        # on CUDA one kernel readies a token's q, k and v and writes its mask (token_qkv)
        self.one_kernel = token_qkv.usable(device, Dh)
        self.seen = torch.zeros(context, dtype=torch.uint8, device=device)

    def span(self, pos: int) -> int:
        """Cache positions one token at `pos` attends over on CUDA: the smallest of 256,
        512, ... (capped at the context) that holds it; later positions are masked."""
        span = min(self.context, 256)
        while span <= pos:
            span = min(self.context, 2 * span)
        return span

    def spans(self) -> list[int]:
        """Every span a token of this context attends over (`span`), shortest first."""
        out = [self.span(0)]
        while out[-1] < self.context:
            out.append(self.span(out[-1]))
        return out

    def _rope(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        """x [T, heads, Dh] at positions pos.., rotate-half convention as in Hugging Face."""
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        T = x.shape[0]
        return x * self.cos[pos:pos + T, None] + rot * self.sin[pos:pos + T, None]

    def embed_token(self, token: int) -> torch.Tensor:
        return self.embed[token].clone()  # [D]

    def embed_tokens(self, tokens: list[int]) -> torch.Tensor:
        return self.embed[torch.tensor(tokens, device=self.device)]  # [T, D]

    def attention(self, layer: int, h: torch.Tensor, pos: int) -> torch.Tensor:
        """Adds attention's output to the residual of one token h [D] at `pos`, or of T
        tokens h [T, D] at positions pos..pos+T-1 (prefill: each attends to the cache and
        to the tokens before it, a causal mask). The KV cache is filled for all of them."""
        if self.fixed and h.dim() == 1:
            self._pos.fill_(pos)
            return self.attend_one(layer, h, self._pos, self.span(pos))
        cfg, p = self.cfg, self.layers[layer]
        H, G, Dh = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        heads = self._qkv(layer, h).view(-1, H + 2 * G, Dh)  # [T, H+2G, Dh]
        T = heads.shape[0]
        qk, v = heads[:, : H + G], heads[:, H + G:]  # q's and k's heads get the same rotation
        if p.qk_norm is not None:
            qk = rms_norm(qk, p.qk_norm, cfg.rms_eps)
        qk = self._rope(qk, pos)
        q, k = qk[:, :H], qk[:, H:]
        self.k_cache[layer, :, pos:pos + T] = k.transpose(0, 1)
        self.v_cache[layer, :, pos:pos + T] = v.transpose(0, 1)
        keys = self.k_cache[layer, :, : pos + T]  # [G, P, Dh], P = pos + T
        vals = self.v_cache[layer, :, : pos + T]
        # heads grouped by their key/value head, tokens side by side: [G, T*H/G, Dh]
        qg = q.reshape(T, G, H // G, Dh).transpose(0, 1).reshape(G, T * (H // G), Dh)
        # token t sees positions up to pos + t: [T*H/G, P], one row per (token, head)
        mask = None if T == 1 else (
            torch.arange(pos + T, device=self.device)[None, :]
            <= torch.arange(pos, pos + T, device=self.device)[:, None]
        ).repeat_interleave(H // G, dim=0)
        if self.device.type == "cuda":  # one kernel where a launch costs more than the math
            out = F.scaled_dot_product_attention(qg, keys, vals, attn_mask=mask)
        else:
            scores = (qg @ keys.transpose(1, 2)) / Dh**0.5  # [G, T*H/G, P]
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            out = scores.softmax(-1, dtype=torch.float32).to(self.dtype) @ vals
        out = out.view(G, T, H // G, Dh).transpose(0, 1).reshape(T, H * Dh)
        return h + _linear(p.o, out[0] if h.dim() == 1 else out, None)

    def _project(self, layer: int, h: torch.Tensor) -> torch.Tensor:
        """The q/k/v product of tokens h [T?, D]: [T?, (H+2G)*Dh]."""
        p = self.layers[layer]
        return _linear(p.qkv, rms_norm(h, p.in_norm, self.cfg.rms_eps), p.qkv_bias)

    def _qkv(self, layer: int, h: torch.Tensor) -> torch.Tensor:
        """q, k and v of tokens h [T?, D] as [T?, (H+2G)*Dh], with OLMoE's norms over the
        whole q and k projections and clip_qkv applied."""
        cfg, p = self.cfg, self.layers[layer]
        H, G, Dh = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        qkv = self._project(layer, h)
        if cfg.spec.qk_norm == "full":
            assert p.q_norm is not None and p.k_norm is not None  # what "full" norms
            q, k = qkv[..., : H * Dh], qkv[..., H * Dh: (H + G) * Dh]
            qkv = torch.cat([rms_norm(q, p.q_norm, cfg.rms_eps),
                             rms_norm(k, p.k_norm, cfg.rms_eps), qkv[..., (H + G) * Dh:]],
                            dim=-1)
        if cfg.clip_qkv is not None:
            qkv = qkv.clamp(-cfg.clip_qkv, cfg.clip_qkv)
        return qkv

    def attend_one(self, layer: int, h: torch.Tensor, pos: torch.Tensor, span: int,
                   out: torch.Tensor | None = None) -> torch.Tensor:
        """Attention for one token h [D] at position `pos` (an int64 [1] on the device,
        below `span`): its keys and values written into the cache at `pos`, the query
        attending over the first `span` positions with those after `pos` masked. No host
        value depends on the position, so the work can be captured once per span. The
        residual plus attention's output is written into `out` where given."""
        cfg, p = self.cfg, self.layers[layer]
        H, G, Dh = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        if self.one_kernel:
            q = token_qkv.prepare(self._project(layer, h), cfg.spec.qk_norm, p.q_norm,
                                  p.k_norm, p.qk_norm, cfg.clip_qkv, cfg.rms_eps, self.cos,
                                  self.sin, pos, self.k_cache[layer], self.v_cache[layer],
                                  self.seen, span, H)
            seen = self.seen[:span].view(torch.bool)[None]
        else:
            heads = self._qkv(layer, h).view(1, H + 2 * G, Dh)
            qk, v = heads[:, : H + G], heads[:, H + G:]
            if p.qk_norm is not None:
                qk = rms_norm(qk, p.qk_norm, cfg.rms_eps)
            half = Dh // 2
            rot = torch.cat([-qk[..., half:], qk[..., :half]], dim=-1)
            qk = qk * self.cos.index_select(0, pos)[:, None] + rot * self.sin.index_select(
                0, pos)[:, None]  # [1, H+G, Dh]
            q, k = qk[0, :H], qk[0, H:]
            self.k_cache[layer].index_copy_(1, pos, k[:, None])  # [G, C, Dh] at pos
            self.v_cache[layer].index_copy_(1, pos, v[0, :, None])
            seen = (self.positions[:span] <= pos)[None]  # [1, span]
        keys, vals = self.k_cache[layer, :, :span], self.v_cache[layer, :, :span]
        # each key/value head with its query heads as one batch of H/G queries: [1, G, H/G,
        # Dh], the 4-D form the fused attention kernels take
        att = F.scaled_dot_product_attention(q.view(1, G, H // G, Dh), keys[None], vals[None],
                                             attn_mask=seen)
        return torch.add(h, _linear(p.o, att.reshape(H * Dh), None), out=out)

    def moe_input(self, layer: int, h: torch.Tensor) -> torch.Tensor:
        return rms_norm(h, self.layers[layer].post_norm, self.cfg.rms_eps)

    def router_logits(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        if router_kernels.usable(x):  # one token on CUDA: one kernel reading x as it is
            return router_kernels.logits(self.routers[layer], x)
        return _linear(self.routers[layer], x.float(), None)  # [T?, E], float32

    def shared_output(self, layer: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The MoE block's output: the routed experts' sum y (in rank order, so it never
        depends on which expert finished first: experts.py) plus Qwen2-MoE's gated shared
        expert, for one token x [D] or T tokens x [T, D]."""
        p = self.layers[layer]
        if p.shared_gate is None:
            return y
        assert p.shared is not None  # the gate of a shared expert comes with it
        shared = experts_out(x if x.dim() == 1 else x[None], p.shared)[0]
        return y + torch.sigmoid(_linear(p.shared_gate, x, None)) * shared

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """[V] in float32 (of the last token when h holds T)."""
        last = h if h.dim() == 1 else h[-1]
        return (self.lm_head @ rms_norm(last, self.final_norm, self.cfg.rms_eps)).float()


def _shared_expert(w: dict[str, torch.Tensor], prefix: str) -> Weights | None:
    """Qwen2-MoE's shared expert as a batch of one, or None."""
    if prefix + "gate_proj.weight" not in w:
        return None
    gate, up, down = (w[prefix + f"{n}.weight"] for n in ("gate_proj", "up_proj", "down_proj"))
    return Weights(torch.cat([gate, up])[None], down[None])
