"""Real checkpoint layouts: tiny random models made with transformers' own classes must give
the same logits and greedy tokens through the streaming engine as through transformers, and
so must the real-shape recipes' checkpoints (shrunk) opened by transformers."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tuner.engine.step.decode import Engine
from tuner.engine.weights import synth
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config

transformers = pytest.importorskip("transformers")

COMMON = dict(vocab_size=96, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, num_experts_per_tok=2, max_position_embeddings=128,
              initializer_range=0.3, rms_norm_eps=1e-6, tie_word_embeddings=False)
ARCHS = {
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(head_dim=8, num_experts=8, moe_intermediate_size=16,
                       intermediate_size=64, norm_topk_prob=True)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(num_experts=8, moe_intermediate_size=16, intermediate_size=64,
                       shared_expert_intermediate_size=24)),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", dict(num_experts=8, intermediate_size=16)),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(num_local_experts=8, intermediate_size=16)),
}
PROMPT = [5, 17, 3, 60, 41, 8, 22, 90]
STEPS = 32


def make(arch: str, folder, **overrides):
    conf_cls, model_cls, extra = ARCHS[arch]
    cfg = getattr(transformers, conf_cls)(**{**COMMON, **extra, **overrides})
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(cfg).eval()
    model.save_pretrained(folder)
    return model


@pytest.mark.parametrize("arch", list(ARCHS))
def test_engine_matches_transformers(arch, tmp_path):
    model = make(arch, tmp_path)
    assert_engine_matches(model, tmp_path, arch)


@pytest.mark.parametrize("name", list(synth.SHAPES))
def test_shape_recipes_open_in_transformers(name, tmp_path):
    """The recipes' config.json and tensor names are what transformers expects of each
    architecture (the published dimensions, shrunk here to a few KiB)."""
    r = synth.shape(name, 2, "fp32")
    small = replace(r, vocab_size=128, hidden_size=32, num_heads=4,
                    num_kv_heads=4 if r.num_kv_heads == r.num_heads else 2, head_dim=8,
                    num_experts=8, top_k=2, expert_width=16,
                    shared_width=24 if r.shared_width else 0, topics=8)
    synth.write(small, tmp_path / "m")
    model = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "m", dtype=torch.float32, attn_implementation="eager").eval()
    assert_engine_matches(model, tmp_path / "m", r.arch)


def assert_engine_matches(model, folder, arch: str) -> None:
    ref_ids = list(PROMPT)
    with torch.no_grad():  # plain greedy: generate() would suppress EOS and others
        for _ in range(STEPS):
            ref_ids.append(int(model(torch.tensor([ref_ids])).logits[0, -1].argmax()))
        ref_logits = model(torch.tensor([ref_ids])).logits[0]  # [T, V]
    ckpt = Checkpoint(folder)
    assert ckpt.config.arch == arch
    engine = Engine(ckpt, Config(model=str(folder), expert_cache=6, prefetch="stale",
                                 io_workers=2, io_urgent=1), torch.device("cpu"))
    ids, worst = list(PROMPT), 0.0
    try:
        for pos in range(len(PROMPT) + STEPS - 1):
            logits = engine.step(ids[pos], pos)
            worst = max(worst, (logits - ref_logits[pos]).abs().max().item())
            if pos >= len(PROMPT) - 1:
                ids.append(int(torch.argmax(logits)))
    finally:
        engine.close()
    print(f"{arch}: max |logit difference| {worst:.2e} over {len(ids) - 1} positions")
    assert worst < 1e-4
    assert ids == ref_ids
