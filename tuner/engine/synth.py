"""Deterministic generator of the embedded demo model (no download, no training).

The weights are random but structured so that routing behaves like a real MoE's:

* skewed popularity: every hidden state carries a shared direction `mu`, and each router
  row has a per-expert component along it, which acts as a popularity bias;
* token-to-token locality: tokens belong to topics, embeddings share their topic's vector
  and the LM head is the embedding matrix, so generated text stays on a topic for a while
  and consecutive tokens route alike;
* later layers more predictable: attention and expert outputs are small next to the
  residual stream, which grows with depth, so layer l's input predicts layer l+1's routing
  better the deeper l is.

The files are a Hugging Face checkpoint (Qwen3-MoE for the demo model; the real-shape
recipes use their model's own architecture where the engine has it): config.json, one
safetensors shard per layer and model.safetensors.index.json, in the recipe's dtype
(bfloat16 by default; float32 for the bit-identity tests). A 16-bit model's name carries its
dtype, so it is never mistaken for a cached float32 one.

`SHAPES` are the published dimensions of four MoE models, with the demo's routing
structure: experts, router, attention and vocabulary sizes as released, the layer count cut
with `layers` where a disk cannot hold them all. DeepSeek-V2-Lite is written as a Qwen2-MoE
checkpoint: its 64 routed experts (width 1408, top-6) and its two shared experts (one
shared expert of width 2816 behind a constant gate of 0.5) as released, but plain
multi-head attention instead of MLA, and its 26 MoE layers without the dense first one.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from safetensors.torch import save_file

from tuner.engine.checkpoint import DTYPE_NAMES
from tuner.engine.model import ModelConfig

ARCH_NAMES = {"qwen3_moe": "Qwen3MoeForCausalLM", "olmoe": "OlmoeForCausalLM",
              "mixtral": "MixtralForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM"}


@dataclass(frozen=True)
class Recipe:
    name: str = "strata-demo-16x64"  # the model's name adds the dtype (see `id`)
    dtype: str = "bf16"  # bf16, fp16 or fp32
    arch: str = "qwen3_moe"
    vocab_size: int = 4096
    hidden_size: int = 256
    num_layers: int = 16
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 64
    num_experts: int = 64
    top_k: int = 6
    expert_width: int = 384
    shared_width: int = 0  # qwen2_moe: the shared expert's width
    rope_theta: float = 1_000_000.0
    rms_eps: float = 1e-6
    topics: int = 64
    seed: int = 1234
    # structure of the residual stream
    shared: float = 1.0  # the popularity direction mu, in every embedding
    topic: float = 1.3  # topic vector scale
    noise: float = 0.6  # per-token noise scale
    popularity: float = 0.04  # spread of per-expert popularity along mu
    router_gain: float = 2.0  # router logit scale
    attn_out: float = 0.35  # attention output scale
    expert_out: float = 0.45  # expert output scale
    early_boost: float = 2.0  # extra output scale of the first layers, fading with depth
    lm_gain: float = 0.25  # LM head scale (sampling sharpness)

    @property
    def id(self) -> str:
        """The model's name: the recipe's name and its dtype (float32 models keep the bare
        name they had before there were other dtypes)."""
        return self.name if self.dtype == "fp32" else f"{self.name}-{self.dtype}"

    @property
    def torch_dtype(self) -> torch.dtype:
        if self.dtype not in DTYPE_NAMES:
            raise ValueError(f"dtype {self.dtype!r}: allowed {', '.join(DTYPE_NAMES)}")
        return DTYPE_NAMES[self.dtype]

    def hf_config(self) -> dict:
        dtype = str(self.torch_dtype).removeprefix("torch.")
        width = {"qwen3_moe": {"moe_intermediate_size": self.expert_width,
                               "intermediate_size": self.expert_width * 4,
                               "norm_topk_prob": True},
                 "qwen2_moe": {"moe_intermediate_size": self.expert_width,
                               "shared_expert_intermediate_size": self.shared_width,
                               "intermediate_size": self.shared_width,
                               "norm_topk_prob": False},
                 "olmoe": {"intermediate_size": self.expert_width, "norm_topk_prob": False,
                           "clip_qkv": None},
                 "mixtral": {"intermediate_size": self.expert_width}}[self.arch]
        experts = "num_local_experts" if self.arch == "mixtral" else "num_experts"
        return {
            "architectures": [ARCH_NAMES[self.arch]],
            "model_type": self.arch,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            experts: self.num_experts,
            "num_experts_per_tok": self.top_k,
            **width,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "rms_norm_eps": self.rms_eps,
            "rope_theta": self.rope_theta,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
            "hidden_act": "silu",
            "attention_bias": False,
            "bos_token_id": None,  # no token ends generation: every id is a word
            "eos_token_id": None,
            "torch_dtype": dtype,
            "dtype": dtype,
            "tuner_recipe": {**asdict(self), "name": self.id},
        }


DEFAULT = Recipe()
# 64 layers of small experts: a model as deep as the large ones, for the UIs' benchmarks
DEEP = Recipe(name="strata-deep-64x32", vocab_size=1024, hidden_size=128, num_layers=64,
              num_heads=2, num_kv_heads=1, head_dim=64, num_experts=32, top_k=4,
              expert_width=128, topics=16)
TINY = Recipe(name="strata-tiny-4x16", dtype="fp32", vocab_size=256, hidden_size=64,
              num_layers=4, num_heads=2, num_kv_heads=1, head_dim=32, num_experts=16,
              top_k=4, expert_width=32, topics=8)

# Published dimensions (config.json of each release); `shape(name, layers, dtype)` cuts layers.
SHAPES = {
    "olmoe": Recipe(name="olmoe-shape", arch="olmoe", vocab_size=50304, hidden_size=2048,
                    num_layers=16, num_heads=16, num_kv_heads=16, head_dim=128,
                    num_experts=64, top_k=8, expert_width=1024, rope_theta=10_000.0,
                    rms_eps=1e-5),
    "qwen3-30b-a3b": Recipe(name="qwen3-30b-a3b-shape", vocab_size=151936, hidden_size=2048,
                            num_layers=48, num_heads=32, num_kv_heads=4, head_dim=128,
                            num_experts=128, top_k=8, expert_width=768),
    "mixtral": Recipe(name="mixtral-8x7b-shape", arch="mixtral", vocab_size=32000,
                      hidden_size=4096, num_layers=32, num_heads=32, num_kv_heads=8,
                      head_dim=128, num_experts=8, top_k=2, expert_width=14336,
                      rms_eps=1e-5),
    "deepseek-v2-lite": Recipe(name="deepseek-v2-lite-shape", arch="qwen2_moe",
                               vocab_size=102400, hidden_size=2048, num_layers=26,
                               num_heads=16, num_kv_heads=16, head_dim=128, num_experts=64,
                               top_k=6, expert_width=1408, shared_width=2816,
                               rope_theta=10_000.0),
}


def shape(name: str, layers: int | None = None, dtype: str = "bf16") -> Recipe:
    """A real-shape recipe, its layers cut to `layers` (the name says how many)."""
    if name not in SHAPES:
        raise ValueError(f"shape {name!r}: allowed {', '.join(SHAPES)}")
    r = SHAPES[name]
    layers = r.num_layers if layers is None else layers
    if not 1 <= layers <= r.num_layers:
        raise ValueError(f"layers = {layers}: {name} has 1 to {r.num_layers}")
    return replace(r, name=f"{r.name}-{layers}x{r.num_experts}", num_layers=layers, dtype=dtype)


def _randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g) * scale


def global_weights(r: Recipe) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(r.seed)
    D, V = r.hidden_size, r.vocab_size
    mu = _randn(g, D)
    mu = mu / mu.norm() * math.sqrt(D)
    topics = _randn(g, r.topics, D, scale=r.topic)
    topic_of = torch.arange(V) % r.topics
    emb = r.shared * mu + topics[topic_of] + _randn(g, V, D, scale=r.noise)
    lm = emb / emb.norm(dim=1, keepdim=True) * r.lm_gain  # tied in direction, not in file
    return {
        "model.embed_tokens.weight": emb,
        "model.norm.weight": torch.ones(D),
        "lm_head.weight": lm,
        "_mu": mu / mu.norm(),
    }


def layer_weights(r: Recipe, layer: int, mu_hat: torch.Tensor) -> dict[str, torch.Tensor]:
    """Layer `layer`'s tensors, experts already in the recipe's dtype (a real-shape layer
    in float32 would need several times the memory)."""
    g = torch.Generator().manual_seed(r.seed * 1000 + layer + 1)
    dtype = r.torch_dtype
    D, E, I = r.hidden_size, r.num_experts, r.expert_width
    H, G, Dh = r.num_heads, r.num_kv_heads, r.head_dim
    p = f"model.layers.{layer}."
    boost = 1 + r.early_boost * (1 - layer / max(1, r.num_layers - 1))
    pop = _randn(g, E, scale=r.popularity)
    router = _randn(g, E, D, scale=1 / math.sqrt(D)) + pop[:, None] * mu_hat[None, :]
    w = {
        p + "input_layernorm.weight": torch.ones(D),
        p + "post_attention_layernorm.weight": torch.ones(D),
        p + "self_attn.q_proj.weight": _randn(g, H * Dh, D, scale=1 / math.sqrt(D)),
        p + "self_attn.k_proj.weight": _randn(g, G * Dh, D, scale=1 / math.sqrt(D)),
        p + "self_attn.v_proj.weight": _randn(g, G * Dh, D, scale=1 / math.sqrt(D)),
        p + "self_attn.o_proj.weight": _randn(g, D, H * Dh,
                                              scale=boost * r.attn_out / math.sqrt(H * Dh)),
    }
    w.update(_qk_norms(r, p + "self_attn."))
    mc = ModelConfig.from_hf(r.hf_config())
    w[mc.router_key(layer)] = router * r.router_gain
    for e in range(E):
        w[mc.expert_key(layer, e, "gate")] = _randn(g, I, D, scale=1 / math.sqrt(D)).to(dtype)
        w[mc.expert_key(layer, e, "up")] = _randn(g, I, D, scale=1 / math.sqrt(D)).to(dtype)
        w[mc.expert_key(layer, e, "down")] = _randn(
            g, D, I, scale=boost * r.expert_out / math.sqrt(I)).to(dtype)
    if r.shared_width:  # Qwen2-MoE: q/k/v biases (zero) and a shared expert, gate 0.5
        S = r.shared_width
        w.update({p + f"self_attn.{n}_proj.bias": torch.zeros(m * Dh)
                  for n, m in (("q", H), ("k", G), ("v", G))})
        w[p + "mlp.shared_expert.gate_proj.weight"] = _randn(g, S, D, scale=1 / math.sqrt(D))
        w[p + "mlp.shared_expert.up_proj.weight"] = _randn(g, S, D, scale=1 / math.sqrt(D))
        w[p + "mlp.shared_expert.down_proj.weight"] = _randn(
            g, D, S, scale=boost * r.expert_out / math.sqrt(S))
        w[p + "mlp.shared_expert_gate.weight"] = torch.zeros(1, D)
    return w


def _qk_norms(r: Recipe, prefix: str) -> dict[str, torch.Tensor]:
    """Qwen3-MoE normalises q and k per head, OLMoE over the whole projection; the others
    not at all."""
    if r.arch == "qwen3_moe":
        return {prefix + "q_norm.weight": torch.ones(r.head_dim),
                prefix + "k_norm.weight": torch.ones(r.head_dim)}
    if r.arch == "olmoe":
        return {prefix + "q_norm.weight": torch.ones(r.num_heads * r.head_dim),
                prefix + "k_norm.weight": torch.ones(r.num_kv_heads * r.head_dim)}
    return {}


SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "shi", "po", "ve", "da", "zu", "ri", "an",
             "el", "os", "um")


def word(token: int) -> str:
    """A pronounceable word per token id: its base-16 digits as syllables. Tokens of one
    topic (same id modulo the topic count) share their last syllable."""
    digits = []
    while True:
        token, d = divmod(token, len(SYLLABLES))
        digits.append(SYLLABLES[d])
        if not token:
            return "".join(reversed(digits))


def write_tokenizer(r: Recipe, folder: Path) -> None:
    """A word-level tokenizer.json, so prompts and output of the demo model are text."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {word(i): i for i in range(r.vocab_size - 1)}
    vocab["<unk>"] = r.vocab_size - 1
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(Path(folder) / "tokenizer.json"))


def write(r: Recipe, folder: Path, progress: Callable[[int, int], None] | None = None,
          workers: int | None = None) -> Path:
    """Writes the checkpoint into `folder` (atomically: a temp folder renamed at the end).
    Layers are made by `workers` threads (default: one per core, at most 8), each layer from
    its own seed, so the bytes do not depend on the count; `progress(shards done, shards)`
    is called as each shard is written."""
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    glob = global_weights(r)
    mu_hat = glob.pop("_mu")
    n = 1 + r.num_layers
    names = [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]

    def shard(i: int) -> list[str]:
        tensors = glob if i == 0 else layer_weights(r, i - 1, mu_hat)
        save_file({k: v.to(r.torch_dtype).contiguous() for k, v in tensors.items()},
                  str(tmp / names[i]), metadata={"format": "pt"})
        return list(tensors)

    weight_map: dict[str, str] = {}
    workers = workers or min(8, os.cpu_count() or 1)
    with ThreadPoolExecutor(workers, thread_name_prefix="tuner-synth") as pool:
        for done, (i, keys) in enumerate(zip(range(n), pool.map(shard, range(n))), 1):
            weight_map.update({k: names[i] for k in keys})
            if progress:
                progress(done, n)
    total = sum((tmp / f).stat().st_size for f in set(weight_map.values()))
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (tmp / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    (tmp / "config.json").write_text(json.dumps(r.hf_config(), indent=1))
    write_tokenizer(r, tmp)
    if folder.exists():
        raise FileExistsError(f"{folder} already exists; remove it to make the model again")
    os.replace(tmp, folder)
    return folder


def cache_dir() -> Path:
    base = os.environ.get("TUNER_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tuner")
    return Path(base) / "models"


def default_model_path(recipe: Recipe = DEFAULT) -> Path:
    return cache_dir() / recipe.id


def ensure(recipe: Recipe = DEFAULT, folder: Path | None = None) -> Path:
    """The model folder, made first if it is not there yet."""
    folder = Path(folder) if folder else default_model_path(recipe)
    if not (folder / "config.json").is_file():
        write(recipe, folder)
    elif not (folder / "tokenizer.json").is_file():  # made by an earlier version
        write_tokenizer(recipe, folder)
    return folder
