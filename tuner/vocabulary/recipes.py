"""The made models' recipes as plain data: what each model is (name, dtype, shape, routing
structure), its config.json, and where the model cache keeps it. No torch: the command line
and preset export read a model's name and shape from here; tuner.engine.weights.synth writes the
weights of a recipe (its docstring says what the routing fields do).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.errors import TunerError

if TYPE_CHECKING:
    from tuner.vocabulary.trace_format import Trace

# A recipe's dtype -> the name torch and config.json give it
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
ARCH_NAMES = {"qwen3_moe": "Qwen3MoeForCausalLM", "olmoe": "OlmoeForCausalLM",
              "mixtral": "MixtralForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM"}


class RecipeError(TunerError, ValueError):
    """A model to make that this generator has no recipe for; the message names the choices."""


@dataclass(frozen=True)
class Recipe:
    # The name changes whenever the weights do, so a cached model of an older version is
    # never taken for this one; the model's name adds the dtype (see `id`).
    name: str = "strata-demo-16x64-v2"
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
    # token domains, (id // topics) % domains, across topics (0: none): text keeps its
    # domain for long, and routers lean by domain, so routing drifts slowly
    domains: int = 0
    seed: int = 1234
    # embeddings, per coordinate
    shared: float = 0.5  # the shared direction mu
    topic: float = 1.3  # the token's topic direction
    domain: float = 0.0  # the token's domain direction
    noise: float = 0.6  # the token's own random part
    # routers, in units of a router row's random part
    popularity: float = 1.3  # spread of the per-expert bias along mu
    # > 0: that bias drawn log-normal (exp(tail * z), centred and scaled to the same
    # spread), so a few experts are well above the rest and most sit close together
    popularity_tail: float = 0.0
    affinity: float = 4.5  # weight of an expert's preferred topics
    domain_affinity: float = 0.0  # spread of an expert's (Gaussian) lean by domain
    router_gain: float = 2.0  # router logit scale
    # each layer's affinity and popularity times exp(spread * z), z drawn per layer: layers
    # of their own character (flat, concentrated, topical) in no order of depth
    layer_spread: float = 0.0
    # v4: writes that leave the routers' structure alone and routers that weigh the rest of
    # the stream alike at every depth (see synth.layer_router and synth._off_structure), and
    # a first layer that reads the shared structure (popularity, topics, domains)
    # `first_context` times as much as the others: below 1, it routes more by the token
    steady_routers: bool = False
    first_context: float = 1.0
    context_layers: int = 1  # the layers over which that weight rises back to 1
    # depth: the MoE block's output norm as a share of the residual stream's
    update_first: float = 0.6
    update_last: float = 0.15
    attn_share: float = 0.07  # attention's output next to the MoE block's
    # LM head: sampling sharpness, how much a token's row follows its own embedding (< 0:
    # a token seldom follows itself, as in text), and the pulls towards the current token's
    # topic and domain
    lm_gain: float = 0.55
    lm_self: float = 1.0
    lm_topic: float = 1.0
    lm_domain: float = 0.0

    @property
    def id(self) -> str:
        """The model's name: the recipe's name and its dtype (float32 models keep the bare
        name they had before there were other dtypes)."""
        return self.name if self.dtype == "fp32" else f"{self.name}-{self.dtype}"

    @property
    def dtype_name(self) -> str:
        """The dtype as torch and config.json name it (bfloat16, ...)."""
        if self.dtype not in DTYPES:
            raise RecipeError(f"dtype {self.dtype!r}: allowed {', '.join(DTYPES)}")
        return DTYPES[self.dtype]

    def hf_config(self) -> dict:
        dtype = self.dtype_name
        widths: dict[str, dict[str, Any]] = {
            "qwen3_moe": {"moe_intermediate_size": self.expert_width,
                          "intermediate_size": self.expert_width * 4,
                          "norm_topk_prob": True},
            "qwen2_moe": {"moe_intermediate_size": self.expert_width,
                          "shared_expert_intermediate_size": self.shared_width,
                          "intermediate_size": self.shared_width,
                          "norm_topk_prob": False},
            "olmoe": {"intermediate_size": self.expert_width, "norm_topk_prob": False,
                      "clip_qkv": None},
            "mixtral": {"intermediate_size": self.expert_width}}
        width = widths[self.arch]
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


# v5: v4's structure (steady routers, the first layers the least local, every shape figure
# in the real logs' range) at top-4, where reading two experts ahead wins back more than
# Belady's lead over LRU, and with experts that lean by domain, so pinning from history
# trails pinning from the whole text: LRU sits between the two, and the seven replay modes
# rank as the middle of the public logs' orders (Kendall's tau 0.8 against each of the
# four at 15, 25 and 50 % of the pairs). v4 was top-6 with no domain lean: it pinned ahead
# of LRU by 5.6-5.8 pp, as the Qwen1.5 logs do, and ranked as DeepSeek-V2-Lite's log does
# only to 0.5-0.6.
DEFAULT = Recipe(name="strata-demo-16x64-v5", top_k=4, noise=1.3, domains=16, domain=2.0,
                 affinity=2.2, popularity=0.6, domain_affinity=0.25, layer_spread=0.15,
                 steady_routers=True, first_context=0.0, context_layers=3, lm_gain=2.2,
                 lm_self=-0.8, lm_topic=1.7, lm_domain=4.0)
# 64 layers of small experts: a model as deep as the large ones, for the UIs' benchmarks.
# Four times the layers write less each (or the stream would forget the token's topic by
# the last layer, and with it the text's locality), and lean harder on the topic.
DEEP = Recipe(name="strata-deep-64x32-v2", vocab_size=1024, hidden_size=128, num_layers=64,
              num_heads=2, num_kv_heads=1, head_dim=64, num_experts=32, top_k=4,
              expert_width=128, topics=16, affinity=3.6, update_first=0.43,
              update_last=0.095, lm_gain=1.0, lm_topic=3.0)
# A quarter of the pairs is one token's lookups here, so topics are weaker and more
# numerous than in the 64-expert models, or LRU would keep just what Belady keeps.
TINY = Recipe(name="strata-tiny-4x16-v2", dtype="fp32", vocab_size=256, hidden_size=64,
              num_layers=4, num_heads=2, num_kv_heads=1, head_dim=32, num_experts=16,
              top_k=4, expert_width=32, topics=16, popularity=1.0, affinity=2.0,
              update_first=0.8, lm_gain=0.3)


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
        raise RecipeError(f"shape {name!r}: allowed {', '.join(SHAPES)}")
    r = SHAPES[name]
    layers = r.num_layers if layers is None else layers
    if not 1 <= layers <= r.num_layers:
        raise RecipeError(f"layers = {layers}: {name} has 1 to {r.num_layers}")
    return replace(r, name=f"{r.name}-{layers}x{r.num_experts}", num_layers=layers, dtype=dtype)


def like(trace: Trace, hidden_size: int, expert_width: int) -> Recipe:
    """The demo model in a routing trace's shape (layers, experts, top-k), for the trace to
    drive; the name says the shape, so each shape is made once."""
    L, E, K = trace.layers, trace.num_experts, trace.top_k
    room = hidden_size - 1  # directions besides mu, for the topics and then the domains
    topics = min(DEFAULT.topics, max(1, room - DEFAULT.domains))
    version = DEFAULT.name.rsplit("-", 1)[1]  # the demo's: a new demo makes them anew
    name = f"strata-like-{L}x{E}-top{K}-{hidden_size}x{expert_width}-{version}"
    return replace(DEFAULT, name=name,
                   num_layers=L, num_experts=E, top_k=K, hidden_size=hidden_size,
                   expert_width=expert_width, topics=topics,
                   domains=min(DEFAULT.domains, room - topics))


def cache_dir() -> Path:
    base = os.environ.get("TUNER_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tuner")
    return Path(base) / "models"


def default_model_path(recipe: Recipe = DEFAULT) -> Path:
    return cache_dir() / recipe.id


def is_made(recipe: Recipe = DEFAULT) -> bool:
    return (default_model_path(recipe) / "config.json").is_file()
