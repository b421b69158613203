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

The files are a Hugging Face Qwen3-MoE checkpoint: config.json, one safetensors shard per
layer and model.safetensors.index.json.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from tuner.engine.model import ModelConfig


@dataclass(frozen=True)
class Recipe:
    name: str = "strata-demo-16x64"
    vocab_size: int = 4096
    hidden_size: int = 256
    num_layers: int = 16
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 64
    num_experts: int = 64
    top_k: int = 6
    expert_width: int = 384
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

    def hf_config(self) -> dict:
        return {
            "architectures": ["Qwen3MoeForCausalLM"],
            "model_type": "qwen3_moe",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "num_experts": self.num_experts,
            "num_experts_per_tok": self.top_k,
            "moe_intermediate_size": self.expert_width,
            "intermediate_size": self.expert_width * 4,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "norm_topk_prob": True,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1_000_000.0,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
            "hidden_act": "silu",
            "attention_bias": False,
            "torch_dtype": "float32",
            "tuner_recipe": asdict(self),
        }


DEFAULT = Recipe()
# 64 layers of small experts: a model as deep as the large ones, for the UIs' benchmarks
DEEP = Recipe(name="strata-deep-64x32", vocab_size=1024, hidden_size=128, num_layers=64,
              num_heads=2, num_kv_heads=1, head_dim=64, num_experts=32, top_k=4,
              expert_width=128, topics=16)
TINY = Recipe(name="strata-tiny-4x16", vocab_size=256, hidden_size=64, num_layers=4,
              num_heads=2, num_kv_heads=1, head_dim=32, num_experts=16, top_k=4,
              expert_width=32, topics=8)


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
    g = torch.Generator().manual_seed(r.seed * 1000 + layer + 1)
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
        p + "self_attn.q_norm.weight": torch.ones(Dh),
        p + "self_attn.k_norm.weight": torch.ones(Dh),
        p + "mlp.gate.weight": router * r.router_gain,
    }
    expert_key = ModelConfig.from_hf(r.hf_config()).expert_key
    for e in range(E):
        w[expert_key(layer, e, "gate")] = _randn(g, I, D, scale=1 / math.sqrt(D))
        w[expert_key(layer, e, "up")] = _randn(g, I, D, scale=1 / math.sqrt(D))
        w[expert_key(layer, e, "down")] = _randn(g, D, I,
                                                 scale=boost * r.expert_out / math.sqrt(I))
    return w


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


def write(r: Recipe, folder: Path, progress=None) -> Path:
    """Writes the checkpoint into `folder` (atomically: a temp folder renamed at the end).
    `progress(done, total)` is called after each shard."""
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    glob = global_weights(r)
    mu_hat = glob.pop("_mu")
    shards = [glob] + [None] * r.num_layers
    n = len(shards)
    weight_map: dict[str, str] = {}
    for i in range(n):
        tensors = shards[i] if i == 0 else layer_weights(r, i - 1, mu_hat)
        fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp / fname),
                  metadata={"format": "pt"})
        weight_map.update({k: fname for k in tensors})
        if progress is not None:
            progress(i + 1, n)
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
    return cache_dir() / recipe.name


def is_made(recipe: Recipe = DEFAULT) -> bool:
    return (default_model_path(recipe) / "config.json").is_file()


def ensure(recipe: Recipe = DEFAULT, folder: Path | None = None, progress=None) -> Path:
    """The model folder, made first if it is not there yet (`progress`: see write)."""
    folder = Path(folder) if folder else default_model_path(recipe)
    if not (folder / "config.json").is_file():
        write(recipe, folder, progress)
    elif not (folder / "tokenizer.json").is_file():  # made by an earlier version
        write_tokenizer(recipe, folder)
    return folder
