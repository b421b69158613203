"""The MoE decoder for Hugging Face MoE checkpoints, one token at a time, with experts
supplied by the caller: Qwen3-MoE, Qwen2-MoE (with its shared expert), OLMoE and Mixtral.

Dense weights (embeddings, attention, norms, routers, shared experts, LM head) are small and
held whole on the compute device. Routed expert weights never live here: the decode loop
hands `expert_out` the three matrices of each selected expert from wherever they sit (arena
slot, link staging, host copy).

Shapes: D hidden, H query heads, G key/value heads, Dh head dim, E experts, I expert width,
V vocabulary, C context (KV cache length).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Arch:
    """How one Hugging Face MoE architecture names and wires its tensors."""

    moe: str  # module holding the router and the experts, under model.layers.{l}.
    parts: tuple[str, str, str]  # names of the (gate, up, down) expert matrices
    experts_key: tuple[str, ...]  # config keys for the number of routed experts, first wins
    width_key: str  # config key: expert width
    qk_norm: str = ""  # "head": RMSNorm per head (Qwen3); "full": over the projection (OLMoE)
    norm_topk: bool | None = None  # None: the config's norm_topk_prob (default False)


# Published Qwen and OLMoE configs say num_experts; transformers 5 writes num_local_experts.
_EXPERTS = ("num_experts", "num_local_experts")
ARCHS: dict[str, Arch] = {
    "qwen3_moe": Arch("mlp", ("gate_proj", "up_proj", "down_proj"), _EXPERTS,
                      "moe_intermediate_size", qk_norm="head"),
    "qwen2_moe": Arch("mlp", ("gate_proj", "up_proj", "down_proj"), _EXPERTS,
                      "moe_intermediate_size"),
    "olmoe": Arch("mlp", ("gate_proj", "up_proj", "down_proj"), _EXPERTS,
                  "intermediate_size", qk_norm="full"),
    "mixtral": Arch("block_sparse_moe", ("w1", "w3", "w2"), ("num_local_experts",),
                    "intermediate_size", norm_topk=True),
}
SUPPORTED_ARCHS = tuple(ARCHS)
EXPERT_PARTS = ("gate", "up", "down")
FOLDER = ("a model folder holds a Hugging Face MoE checkpoint: config.json and its "
          "*.safetensors weights")


class ModelError(ValueError):
    """A model folder that cannot be used. The message names the file, what is wrong with
    it and what is allowed: it is the one line a command prints."""


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
    clip_qkv: float | None = None

    @property
    def spec(self) -> Arch:
        return ARCHS[self.arch]

    def expert_key(self, layer: int, expert: int, part: str) -> str:
        """Tensor name of one expert matrix (part: gate, up or down)."""
        name = self.spec.parts[EXPERT_PARTS.index(part)]
        return f"model.layers.{layer}.{self.spec.moe}.experts.{expert}.{name}.weight"

    def router_key(self, layer: int) -> str:
        return f"model.layers.{layer}.{self.spec.moe}.gate.weight"

    @classmethod
    def from_hf(cls, cfg: dict) -> ModelConfig:
        """Raises ModelError naming the key that is wrong (the caller adds the file)."""
        arch = cfg.get("model_type", "?")
        if arch not in ARCHS:
            raise ModelError(f"model_type {arch!r} is not supported: it is not one of the MoE "
                             f"architectures {', '.join(SUPPORTED_ARCHS)}")
        spec = ARCHS[arch]
        step = cfg.get("decoder_sparse_step", 1)
        if cfg.get("mlp_only_layers") or step not in (None, 1):
            raise ModelError(f"{arch}: dense MLP layers (mlp_only_layers, decoder_sparse_step "
                             f"{step}) are not supported; every layer must be a MoE layer")
        experts = next((cfg[k] for k in spec.experts_key if cfg.get(k)), None)
        if experts is None:
            raise ModelError(f"none of {', '.join(spec.experts_key)} is set: a {arch} MoE "
                             "config names its number of routed experts")
        try:
            return cls._from_keys(cfg, arch, spec, experts)
        except KeyError as err:
            raise ModelError(f"key {err.args[0]!r} is missing: a {arch} config has it") \
                from None

    @classmethod
    def _from_keys(cls, cfg: dict, arch: str, spec: Arch, experts: int) -> ModelConfig:
        heads = cfg["num_attention_heads"]
        rope = cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta")
        norm_topk = spec.norm_topk if spec.norm_topk is not None else \
            cfg.get("norm_topk_prob", False)
        return cls(
            arch=arch,
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
            num_experts=experts,
            top_k=cfg["num_experts_per_tok"],
            expert_width=cfg[spec.width_key],
            rms_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=rope or 10_000.0,
            norm_topk_prob=bool(norm_topk),
            clip_qkv=cfg.get("clip_qkv"),
        )

    @classmethod
    def read(cls, folder: Path, raw: dict | None = None) -> ModelConfig:
        """The config of a model folder (`raw`: its config.json, when already read)."""
        raw = read_config(folder) if raw is None else raw
        try:
            return cls.from_hf(raw)
        except ModelError as err:
            raise ModelError(f"{Path(folder) / 'config.json'}: {err}") from None


def read_config(folder: Path) -> dict:
    """The folder's config.json as a dict; ModelError naming the file when there is none or
    it is not a JSON object."""
    folder = Path(folder)
    if not folder.is_dir():
        what = "is a file" if folder.exists() else "does not exist"
        raise ModelError(f"{folder} {what}: {FOLDER}")
    path = folder / "config.json"
    if not path.is_file():
        raise ModelError(f"{path} is missing: {FOLDER}")
    try:
        cfg = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ModelError(f"{path} is not readable JSON ({err}): {FOLDER}") from None
    if not isinstance(cfg, dict):
        raise ModelError(f"{path} holds a JSON {type(cfg).__name__}, not an object: {FOLDER}")
    return cfg


def _linear(w: torch.Tensor, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return w @ x if bias is None else w @ x + bias


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
            a = p + "self_attn."
            self.layers.append({
                "in_norm": w[p + "input_layernorm.weight"],
                "post_norm": w[p + "post_attention_layernorm.weight"],
                "q": w[a + "q_proj.weight"],  # [H*Dh, D]
                "k": w[a + "k_proj.weight"],  # [G*Dh, D]
                "v": w[a + "v_proj.weight"],
                "o": w[a + "o_proj.weight"],  # [D, H*Dh]
                "q_bias": w.get(a + "q_proj.bias"),
                "k_bias": w.get(a + "k_proj.bias"),
                "v_bias": w.get(a + "v_proj.bias"),
                "q_norm": w.get(a + "q_norm.weight"),  # [Dh] per head, or [H*Dh] (full)
                "k_norm": w.get(a + "k_norm.weight"),
                "shared": tuple(w.get(p + f"mlp.shared_expert.{n}.weight")
                                for n in ("gate_proj", "up_proj", "down_proj")),
                "shared_gate": w.get(p + "mlp.shared_expert_gate.weight"),  # [1, D]
            })
        # Routers stacked so a predictor can apply layer l+1's router to layer l's input.
        self.routers = torch.stack([w[cfg.router_key(i)] for i in range(L)])
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
        q, k, v = (_linear(p[n], x, p[n + "_bias"]) for n in ("q", "k", "v"))
        if cfg.spec.qk_norm == "full":
            q, k = rms_norm(q, p["q_norm"], cfg.rms_eps), rms_norm(k, p["k_norm"], cfg.rms_eps)
        if cfg.clip_qkv is not None:
            q, k, v = (t.clamp(-cfg.clip_qkv, cfg.clip_qkv) for t in (q, k, v))
        q, k, v = q.view(H, Dh), k.view(G, Dh), v.view(G, Dh)
        if cfg.spec.qk_norm == "head":
            q, k = rms_norm(q, p["q_norm"], cfg.rms_eps), rms_norm(k, p["k_norm"], cfg.rms_eps)
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

    def moe_output(self, layer: int, x: torch.Tensor, weights: torch.Tensor,
                   outs: list[torch.Tensor]) -> torch.Tensor:
        """The MoE block's output: routed outputs summed in rank order ([k] @ [k, D]), so it
        never depends on which expert finished first, plus Qwen2-MoE's gated shared expert."""
        y = weights @ torch.stack(outs)
        p = self.layers[layer]
        if p["shared_gate"] is None:
            return y
        return y + torch.sigmoid(p["shared_gate"] @ x) * expert_out(x, *p["shared"])

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return self.lm_head @ rms_norm(h, self.final_norm, self.cfg.rms_eps)  # [V]
