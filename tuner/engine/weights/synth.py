"""Deterministic generator of the embedded demo model (no download, no training).

The weights are random but structured so that routing fails the way a real MoE's does
(figures in the docs' results pages, measured with `tuner trace stats` and `tuner realism`):

* mild popularity, every expert used: each router row is a random direction plus a small
  per-expert component along a shared direction `mu` (a popularity bias), as a trained
  router with a load-balancing loss would leave it (Gaussian in v4; v3 drew it log-normal,
  `popularity_tail`, a few experts above a flat bulk);
* topic locality: tokens belong to topics (orthonormal directions in the embeddings), each
  layer's router gives every topic a few preferred experts in a balanced design (each
  expert preferred by equally many topics), and the LM head leans towards the current
  token's topic, so text returns to a topic now and then: consecutive tokens route a little
  alike, while the whole text still spreads over all experts;
* the token itself: a token's own random part of its embedding (`noise`) moves its routing
  too, so routing is not decided by the topic alone;
* domains (v3): tokens also belong to domains across the topics; the LM head leans hard
  towards the current token's domain, so a conversation keeps the domain its prompt ended
  in and draws on that part of the vocabulary: routing drifts from conversation to
  conversation;
* layers of their own character (v3): each layer's topic affinity and popularity are the
  recipe's times a factor drawn for that layer (`layer_spread`), so some layers are flat,
  some concentrated, in no order of depth;
* depth: each layer writes a share of the residual stream's norm that falls from the first
  layer to the last (geometrically, by relative depth), so a layer's input predicts the next
  layer's routing better the deeper it is, whatever the layer count; the routers read the
  topic and popularity directions scaled to the residual stream's expected norm, so the
  structure holds at depth instead of being washed out;
* steady routers (v4): the layers' writes (experts' and attention's output projections)
  leave mu, the topics and the domains as the embedding made them, and each router weighs
  the rest of the stream as the first layer's does, so every layer reads the same structure
  and layers differ by their own character, not by depth (v3's random writes blurred the
  topics a little more at each layer: its locality and cacheability fell with depth); the
  first layer reads that structure at `first_context` of the others' weight, rising over
  `context_layers`, so the first layers route by the token more than by the text around it
  and are the least local, as the first layer is in every real multi-layer log.

The recipe's defaults are the v2 demo's structure, which the tiny, deep and real-shape
recipes keep (their bytes do not change); the v3, v4 and v5 demo models set the fields
above, and v5 also gives each expert a lean by domain (`domain_affinity`), so the experts
in favour drift with the conversation's domain.

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
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from tuner.engine.weights import router as routing
from tuner.engine.weights.model import ModelConfig, Weights, experts_out
from tuner.vocabulary.recipes import (  # noqa: F401 (the names callers know this module by)
    DEEP,
    DEFAULT,
    SHAPES,
    TINY,
    Recipe,
    RecipeError,
    cache_dir,
    default_model_path,
    is_made,
    like,
    shape,
)

PROBES = 32  # inputs on which a layer's output norm is measured while it is made


def torch_dtype(r: Recipe) -> torch.dtype:
    return getattr(torch, r.dtype_name)


def _randn(g: torch.Generator, *dims: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*dims, generator=g).mul_(scale)


def _unit(t: torch.Tensor) -> torch.Tensor:
    return t / t.norm(dim=-1, keepdim=True)


@dataclass
class Stream:
    """What each layer is made against: the shared directions of the residual stream, an
    embedding's expected norm, and sample inputs of the MoE block."""


    mu: torch.Tensor  # [D] unit
    topics: torch.Tensor  # [T, D] unit rows, orthogonal to mu and to each other (T < D)
    domains: torch.Tensor  # [N, D] unit rows, orthogonal to mu, the topics and each other
    norm0: float  # expected norm of an embedding
    probes: torch.Tensor  # [P, D] inputs of a MoE block (RMS-normalised embeddings)


def global_weights(r: Recipe) -> tuple[dict[str, torch.Tensor], Stream]:
    g = torch.Generator().manual_seed(r.seed)
    D, V = r.hidden_size, r.vocab_size
    mu = _unit(_randn(g, D))
    # the first column of Q is +-mu, the others an orthonormal basis of the rest
    basis = torch.linalg.qr(torch.cat([mu[:, None], _randn(g, D, D - 1)], 1))[0][:, 1:].T
    topics = basis[: r.topics] if r.topics < D else _unit(_randn(g, r.topics, D))
    topic_of = torch.arange(V) % r.topics
    emb = math.sqrt(D) * (r.shared * mu + r.topic * topics[topic_of]) + _randn(
        g, V, D, scale=r.noise)
    if r.domains and r.topics + r.domains > D - 1:
        raise ValueError(f"topics {r.topics} + domains {r.domains} need a hidden size above "
                         f"their sum; hidden_size is {D}")
    pull = r.lm_topic * topics[topic_of]  # the LM head's lean towards the token's topic
    domains = basis[r.topics: r.topics + r.domains]  # after the topics' (none drawn)
    if r.domains:
        domain_of = torch.arange(V) // r.topics % r.domains
        emb += math.sqrt(D) * r.domain * domains[domain_of]
        pull = pull + r.lm_domain * domains[domain_of]
    lm = _unit(r.lm_self * _unit(emb) + pull) * r.lm_gain
    probes = _unit(emb[torch.randint(0, V, (PROBES,), generator=g)]) * math.sqrt(D)
    norm0 = float(emb.norm(dim=1).mean())
    weights = {
        "model.embed_tokens.weight": emb,
        "model.norm.weight": torch.ones(D),
        "lm_head.weight": lm,
    }
    return weights, Stream(mu, topics, domains, norm0, probes)


def _preferences(r: Recipe, g: torch.Generator) -> torch.Tensor:
    """[E, T] 0/1: the experts each topic prefers at one layer, balanced: each topic prefers
    top-k experts and each expert is preferred by T * k / E topics (rounded)."""
    E, m = r.num_experts, r.top_k
    order = torch.randperm(E, generator=g)
    pref = torch.zeros(E, r.topics)
    for t in range(r.topics):
        pref[order[(t * m + torch.arange(m)) % E], t] = 1.0
    return pref


def _stream_norm(r: Recipe, stream: Stream, layer: int) -> float:
    """The residual stream's expected norm entering `layer`: each layer before it adds its
    update and its attention's at right angles to the stream."""
    norm = stream.norm0
    for j in range(layer):
        norm *= math.sqrt(1 + _update(r, j) ** 2 * (1 + r.attn_share ** 2))
    return norm


def _own_share(r: Recipe, stream: Stream, layer: int) -> float:
    """The share of the stream's expected norm entering `layer` that is not along mu, the
    topics or the domains: the token's own part and the layers' writes, which grow with
    depth while the embedding's structure does not."""
    structured = math.sqrt(r.shared ** 2 + r.topic ** 2 + r.domain ** 2)
    s0 = structured / math.sqrt(structured ** 2 + r.noise ** 2)
    return math.sqrt(1 - (s0 * stream.norm0 / _stream_norm(r, stream, layer)) ** 2)


def _update(r: Recipe, layer: int) -> float:
    """The MoE block's output norm as a share of the stream's, falling with depth."""
    depth = layer / max(1, r.num_layers - 1)
    return r.update_first ** (1 - depth) * r.update_last ** depth


def _output_norm(r: Recipe, stream: Stream, router: torch.Tensor,
                 experts: list[tuple[torch.Tensor, ...]]) -> float:
    """Mean norm of the MoE block's output on the probe inputs (in float32, from the
    experts as stored)."""
    normalise = ModelConfig.from_hf(r.hf_config()).norm_topk_prob
    total = 0.0
    for x in stream.probes:
        logits = router @ x
        sel = routing.select(logits, None, r.top_k, 0, 0.0, 0.0)
        w = routing.weights(logits, sel, normalise)
        chosen = [experts[e] for e in sel.tolist()]
        batch = Weights(torch.stack([torch.cat([g, u]) for g, u, _ in chosen]).float(),
                        torch.stack([d for _, _, d in chosen]).float())
        total += float((w @ experts_out(x, batch)).norm())
    return total / len(stream.probes)


def layer_weights(r: Recipe, layer: int, stream: Stream) -> dict[str, torch.Tensor]:
    """Layer `layer`'s tensors, experts already in the recipe's dtype (a real-shape layer
    in float32 would need several times the memory). Depends on the layers before it only
    through the stream's expected norm, so layers can be made in any order."""
    g = torch.Generator().manual_seed(r.seed * 1000 + layer + 1)
    dtype = torch_dtype(r)
    D, E, I = r.hidden_size, r.num_experts, r.expert_width
    H, G, Dh = r.num_heads, r.num_kv_heads, r.head_dim
    p = f"model.layers.{layer}."
    update = _update(r, layer)
    norm = _stream_norm(r, stream, layer)
    router = layer_router(r, layer, stream, g)
    experts = [tuple(_randn(g, *dims, scale=1 / math.sqrt(dims[1])).to(dtype)
                     for dims in ((I, D), (I, D), (D, I))) for _ in range(E)]
    if r.steady_routers:
        experts = [(gate, up, _off_structure(down.float(), stream).to(dtype))
                   for gate, up, down in experts]
    # down projections scaled so the block writes `update` times the stream's norm
    scale = update * norm / _output_norm(r, stream, router, experts)
    o_proj = _randn(g, D, H * Dh, scale=r.attn_share * scale / math.sqrt(H * Dh))
    if r.steady_routers:
        o_proj = _off_structure(o_proj, stream)
    w = {
        p + "input_layernorm.weight": torch.ones(D),
        p + "post_attention_layernorm.weight": torch.ones(D),
        p + "self_attn.q_proj.weight": _randn(g, H * Dh, D, scale=1 / math.sqrt(D)),
        p + "self_attn.k_proj.weight": _randn(g, G * Dh, D, scale=1 / math.sqrt(D)),
        p + "self_attn.v_proj.weight": _randn(g, G * Dh, D, scale=1 / math.sqrt(D)),
        p + "self_attn.o_proj.weight": o_proj,
    }
    w.update(_qk_norms(r, p + "self_attn."))
    mc = ModelConfig.from_hf(r.hf_config())
    w[mc.router_key(layer)] = router
    for e, (gate, up, down) in enumerate(experts):
        w[mc.expert_key(layer, e, "gate")] = gate
        w[mc.expert_key(layer, e, "up")] = up
        w[mc.expert_key(layer, e, "down")] = (down.float() * scale).to(dtype)
    if r.shared_width:  # Qwen2-MoE: q/k/v biases (zero) and a shared expert, gate 0.5,
        S = r.shared_width  # writing about as much as one routed expert
        w.update({p + f"self_attn.{n}_proj.bias": torch.zeros(m * Dh)
                  for n, m in (("q", H), ("k", G), ("v", G))})
        w[p + "mlp.shared_expert.gate_proj.weight"] = _randn(g, S, D, scale=1 / math.sqrt(D))
        w[p + "mlp.shared_expert.up_proj.weight"] = _randn(g, S, D, scale=1 / math.sqrt(D))
        w[p + "mlp.shared_expert.down_proj.weight"] = _randn(g, D, S,
                                                             scale=scale / math.sqrt(S))
        w[p + "mlp.shared_expert_gate.weight"] = torch.zeros(1, D)
    return w


def _off_structure(t: torch.Tensor, stream: Stream) -> torch.Tensor:
    """`t` [D, ...] with its part along mu, the topics and the domains removed: a layer that
    writes it leaves the structure the routers read as the embedding made it."""
    basis = torch.cat([stream.mu[None], stream.topics, stream.domains])
    return t - basis.T @ (basis @ t)


def layer_router(r: Recipe, layer: int, stream: Stream, g: torch.Generator) -> torch.Tensor:
    """Layer `layer`'s router [E, D]: each row a random direction plus the structure the
    recipe gives it (topics, popularity, domains), scaled to keep pace with the stream.
    Draws from `g`, the layer's generator, before the experts do."""
    D, E = r.hidden_size, r.num_experts
    grown = _stream_norm(r, stream, layer) / stream.norm0
    rand = _randn(g, E, D, scale=1 / math.sqrt(D))
    rand -= (rand @ stream.mu)[:, None] * stream.mu  # popularity only through `popularity`
    if r.steady_routers:
        # topics and domains read only through the structure; the rest of the stream (the
        # token's own part and what the layers before wrote) weighed as at the first layer
        context = torch.cat([stream.topics, stream.domains])
        rand -= (rand @ context.T) @ context
        rand *= _own_share(r, stream, 0) / _own_share(r, stream, layer)
    pop = _randn(g, E, scale=r.popularity)
    if r.popularity_tail and r.popularity:
        t = r.popularity_tail
        mean, std = math.exp(t * t / 2), math.sqrt((math.exp(t * t) - 1) * math.exp(t * t))
        pop = r.popularity * (torch.exp(t * pop / r.popularity) - mean) / std
    affinity, popularity, by_domain = _character(r, layer)
    structure = (affinity * _preferences(r, g) @ stream.topics
                 + popularity * pop[:, None] * stream.mu)
    if r.domains:
        structure += by_domain @ stream.domains
    return (rand + grown / math.sqrt(D) * structure) * r.router_gain


def _character(r: Recipe, layer: int) -> tuple[float, float, torch.Tensor]:
    """The layer's topic affinity, its popularity's scale (times `popularity`) and each
    expert's lean by domain [E, N]: the recipe's, each scale times exp(layer_spread * z),
    and in the first `context_layers` layers times a weight rising from `first_context`.
    Drawn from the layer's own seed, apart from its weights', so recipes without domains or
    spread keep their bytes."""
    g = torch.Generator().manual_seed(r.seed * 7919 + layer)
    a, p, d = torch.exp(r.layer_spread * torch.randn(3, generator=g)).tolist()
    first = r.first_context + (1 - r.first_context) * min(1.0, layer / r.context_layers)
    by_domain = _randn(g, r.num_experts, r.domains, scale=r.domain_affinity * d * first)
    return r.affinity * a * first, p * first, by_domain


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
    glob, stream = global_weights(r)
    n = 1 + r.num_layers
    names = [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]

    def shard(i: int) -> list[str]:
        tensors = glob if i == 0 else layer_weights(r, i - 1, stream)
        save_file({k: v.to(torch_dtype(r)).contiguous() for k, v in tensors.items()},
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


def ensure(recipe: Recipe = DEFAULT, folder: Path | None = None, progress=None) -> Path:
    """The model folder, made first if it is not there yet (`progress`: see write)."""
    folder = Path(folder) if folder else default_model_path(recipe)
    if not (folder / "config.json").is_file():
        write(recipe, folder, progress)
    elif not (folder / "tokenizer.json").is_file():  # made by an earlier version
        write_tokenizer(recipe, folder)
    return folder
