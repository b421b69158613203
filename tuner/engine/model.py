"""The MoE decoder: Qwen3-MoE layout, one token at a time, experts supplied by the caller.

Dense weights (embeddings, attention, norms, routers, LM head) are small and held whole on
the compute device. Expert weights never live here: the decode loop hands `expert_out` the
three matrices of each selected expert from wherever they sit (arena slot, link staging,
host copy).

Shapes: D hidden, H query heads, G key/value heads, Dh head dim, E experts, I expert width,
V vocabulary, C context (KV cache length).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

SUPPORTED_ARCHS = ("qwen3_moe",)


@dataclass(frozen=True)
class ModelConfig:
    arch: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    num_experts: int
    top_k: int
    expert_width: int
    rms_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    norm_topk_prob: bool = True
    qk_norm: bool = True

    @classmethod
    def from_hf(cls, cfg: dict) -> "ModelConfig":
        arch = cfg.get("model_type", "?")
        if arch not in SUPPORTED_ARCHS:
            raise ValueError(
                f"unsupported model_type {arch!r}; supported: {', '.join(SUPPORTED_ARCHS)}"
            )
        heads = cfg["num_attention_heads"]
        return cls(
            arch=arch,
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=cfg.get("num_key_value_heads", heads),
            head_dim=cfg.get("head_dim", cfg["hidden_size"] // heads),
            num_experts=cfg["num_experts"],
            top_k=cfg["num_experts_per_tok"],
            expert_width=cfg["moe_intermediate_size"],
            rms_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=cfg.get("rope_theta", 1_000_000.0),
            norm_topk_prob=cfg.get("norm_topk_prob", True),
        )

    @classmethod
    def read(cls, folder: Path) -> "ModelConfig":
        path = Path(folder) / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing; a model folder needs config.json")
        return cls.from_hf(json.loads(path.read_text()))


def expert_key(layer: int, expert: int, part: str) -> str:
    """Tensor name of one expert matrix in the Hugging Face Qwen3-MoE layout."""
    return f"model.layers.{layer}.mlp.experts.{expert}.{part}_proj.weight"


EXPERT_PARTS = ("gate", "up", "down")


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    var = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(var + eps) * w


def expert_out(x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor):
    """SwiGLU expert. x [D]; gate, up [I, D]; down [D, I] -> [D]."""
    if gate.dtype != x.dtype:
        gate, up, down = gate.to(x.dtype), up.to(x.dtype), down.to(x.dtype)
    return down @ (F.silu(gate @ x) * (up @ x))


class Decoder:
    """Dense parts of the model plus a KV cache for one sequence of up to C tokens."""

    def __init__(self, cfg: ModelConfig, dense: dict[str, torch.Tensor], context: int,
                 device: torch.device):
        self.cfg = cfg
        self.device = device
        self.dtype = torch.float32
        w = {k: v.to(device=device, dtype=self.dtype) for k, v in dense.items()}
        self.embed = w["model.embed_tokens.weight"]  # [V, D]
        self.final_norm = w["model.norm.weight"]
        self.lm_head = w.get("lm_head.weight", self.embed)  # [V, D]
        L = cfg.num_layers
        self.layers = []
        for layer in range(L):
            p = f"model.layers.{layer}."
            self.layers.append({
                "in_norm": w[p + "input_layernorm.weight"],
                "post_norm": w[p + "post_attention_layernorm.weight"],
                "q": w[p + "self_attn.q_proj.weight"],  # [H*Dh, D]
                "k": w[p + "self_attn.k_proj.weight"],  # [G*Dh, D]
                "v": w[p + "self_attn.v_proj.weight"],
                "o": w[p + "self_attn.o_proj.weight"],  # [D, H*Dh]
                "q_norm": w.get(p + "self_attn.q_norm.weight"),
                "k_norm": w.get(p + "self_attn.k_norm.weight"),
            })
        # Routers stacked so a predictor can apply layer l+1's router to layer l's input.
        self.routers = torch.stack([w[f"model.layers.{i}.mlp.gate.weight"] for i in range(L)])
        self.context = context
        G, Dh = cfg.num_kv_heads, cfg.head_dim
        self.k_cache = torch.zeros(L, G, context, Dh, device=device, dtype=self.dtype)
        self.v_cache = torch.zeros(L, G, context, Dh, device=device, dtype=self.dtype)
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, Dh, 2, dtype=torch.float64) / Dh))
        ang = torch.arange(context, dtype=torch.float64)[:, None] * inv[None, :]  # [C, Dh/2]
        self.cos = ang.cos().to(device, self.dtype)
        self.sin = ang.sin().to(device, self.dtype)

    def _rope(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        """x [heads, Dh], rotate-half convention as in Hugging Face."""
        half = x.shape[-1] // 2
        cos = torch.cat([self.cos[pos], self.cos[pos]])
        sin = torch.cat([self.sin[pos], self.sin[pos]])
        rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rot * sin

    def embed_token(self, token: int) -> torch.Tensor:
        return self.embed[token].clone()  # [D]

    def attention(self, layer: int, h: torch.Tensor, pos: int) -> torch.Tensor:
        """Adds attention's output to the residual h [D] for the token at `pos`."""
        cfg, p = self.cfg, self.layers[layer]
        H, G, Dh = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        x = rms_norm(h, p["in_norm"], cfg.rms_eps)
        q = (p["q"] @ x).view(H, Dh)
        k = (p["k"] @ x).view(G, Dh)
        v = (p["v"] @ x).view(G, Dh)
        if p["q_norm"] is not None:
            q = rms_norm(q, p["q_norm"], cfg.rms_eps)
            k = rms_norm(k, p["k_norm"], cfg.rms_eps)
        q, k = self._rope(q, pos), self._rope(k, pos)
        self.k_cache[layer, :, pos] = k
        self.v_cache[layer, :, pos] = v
        keys = self.k_cache[layer, :, : pos + 1]  # [G, T, Dh]
        vals = self.v_cache[layer, :, : pos + 1]
        qg = q.view(G, H // G, Dh)  # heads grouped by their key/value head
        scores = (qg @ keys.transpose(1, 2)) / Dh**0.5  # [G, H/G, T]
        out = (scores.softmax(-1) @ vals).reshape(H * Dh)  # [H*Dh]
        return h + p["o"] @ out

    def moe_input(self, layer: int, h: torch.Tensor) -> torch.Tensor:
        return rms_norm(h, self.layers[layer]["post_norm"], self.cfg.rms_eps)

    def router_logits(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        return self.routers[layer] @ x  # [E]

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return self.lm_head @ rms_norm(h, self.final_norm, self.cfg.rms_eps)  # [V]
