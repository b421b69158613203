"""The model generator: routing that fails the way real MoE routing fails (DESIGN section
6; the tiny recipe keeps the v2 structure and its ranges, checked here; the demo model's
routing against public route logs is checked in tests/traces/test_demo_ranking.py and the
docs' results page of the demo model has its figures), dtypes, names that say what the
weights are, real-shape recipes, and bytes that do not depend on how many threads made
them."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tuner.engine.step.decode import Engine
from tuner.engine.step.reference import Resident
from tuner.engine.weights import synth
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config
from tuner.traces.record import record
from tuner.traces.stats import trace_stats
from tuner.vocabulary.model_config import ModelConfig


def test_tiny_models_routing_lands_in_the_ranges_of_real_logs(tiny_model):
    trace, _ = record(Config(model=str(tiny_model), io_workers=2, io_urgent=1), 512,
                      logits=True)
    t = trace_stats(trace)["totals"]  # arena sizes: 12.5, 25, 50, 75 % of the pairs
    lru, opt, pinned = (t["hit_rate"][c] for c in ("lru", "opt", "static"))
    assert t["top10_share"] <= 25 and t["gini"] <= 0.30 and t["unrouted_pct"] <= 2
    assert 25 <= t["prev_pct"] <= 45 and t["prev_temporal_pp"] >= 8
    assert 80 <= t["stale_pct"] <= 89
    assert 25 <= lru[1] <= 50 and opt[1] - lru[1] >= 15 and opt[2] - lru[2] >= 15
    assert pinned[1] <= 45


def test_names_carry_the_dtype_of_16_bit_models():
    assert synth.DEFAULT.dtype == "bf16" and synth.DEFAULT.id == "strata-demo-16x64-v5-bf16"
    assert synth.TINY.id == "strata-tiny-4x16-v2"  # float32 keeps the name it always had
    assert replace(synth.TINY, dtype="fp16").id == "strata-tiny-4x16-v2-fp16"
    assert synth.default_model_path().name == "strata-demo-16x64-v5-bf16"


@pytest.mark.parametrize("name, dims", [
    ("olmoe", dict(arch="olmoe", num_layers=16, hidden_size=2048, num_experts=64, top_k=8,
                   expert_width=1024, num_heads=16, vocab_size=50304)),
    ("qwen3-30b-a3b", dict(arch="qwen3_moe", num_layers=48, hidden_size=2048,
                           num_experts=128, top_k=8, expert_width=768, num_kv_heads=4)),
    ("mixtral", dict(arch="mixtral", num_layers=32, hidden_size=4096, num_experts=8,
                     top_k=2, expert_width=14336, vocab_size=32000)),
    ("deepseek-v2-lite", dict(arch="qwen2_moe", num_layers=26, hidden_size=2048,
                              num_experts=64, top_k=6, expert_width=1408, shared_width=2816)),
])
def test_shapes_have_the_published_dimensions(name, dims):
    r = synth.shape(name)
    mc = ModelConfig.from_hf(r.hf_config())
    for key, value in dims.items():
        assert getattr(r, key) == value, key
    assert (mc.arch, mc.num_experts, mc.top_k, mc.expert_width) == (
        r.arch, r.num_experts, r.top_k, r.expert_width)
    cut = synth.shape(name, 2, "fp16")
    assert cut.num_layers == 2 and cut.id == f"{synth.SHAPES[name].name}-2x{r.num_experts}-fp16"


def test_bad_shapes_layers_and_dtypes_are_named(tmp_path):
    with pytest.raises(ValueError, match="shape 'llama': allowed olmoe, qwen3-30b-a3b"):
        synth.shape("llama")
    with pytest.raises(ValueError, match="layers = 17: olmoe has 1 to 16"):
        synth.shape("olmoe", 17)
    with pytest.raises(ValueError, match="dtype 'fp8': allowed fp32, fp16, bf16"):
        synth.write(replace(synth.TINY, dtype="fp8"), tmp_path / "m")


def test_make_refuses_layers_without_a_shape(tmp_path, refuses):

    refuses(["model", "make", "--tiny", "--layers", "2", "--out", str(tmp_path / "m")],
            "--layers needs --shape")


def test_bytes_do_not_depend_on_the_thread_count(tmp_path):
    seen = []
    a = synth.write(synth.TINY, tmp_path / "a", workers=1)
    b = synth.write(synth.TINY, tmp_path / "b", progress=lambda *p: seen.append(p), workers=3)
    files = sorted(p.name for p in a.glob("*.safetensors"))
    assert files == sorted(p.name for p in b.glob("*.safetensors"))
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert seen[-1] == (len(files), len(files)) and len(seen) == len(files)


def test_the_demo_structure_is_bit_stable(tmp_path):
    """Domains, layers of their own character and steady routers come from seeds alone:
    the same recipe gives the same bytes, whatever the thread count."""
    r = replace(synth.DEFAULT, name="demo-small", dtype="fp32", vocab_size=512, hidden_size=64,
                num_layers=3, num_heads=2, num_kv_heads=1, head_dim=32, num_experts=16,
                top_k=4, expert_width=16, topics=16, domains=8)
    a = synth.write(r, tmp_path / "a", workers=1)
    b = synth.write(r, tmp_path / "b", workers=3)
    files = sorted(p.name for p in a.glob("*.safetensors"))
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    with pytest.raises(ValueError, match="topics 60 \\+ domains 8 need a hidden size above"):
        synth.global_weights(replace(r, topics=60))


def test_v4_layers_write_nothing_along_what_the_routers_read():
    """Steady routers: the experts' and attention's writes leave mu, the topics and the
    domains as the embedding made them, so the routers read the same structure at every
    depth; without, a random write blurs it more with each layer."""
    r = replace(synth.DEFAULT, name="v4-small", dtype="fp32", vocab_size=512, hidden_size=64,
                num_layers=3, num_heads=2, num_kv_heads=1, head_dim=32, num_experts=16,
                top_k=4, expert_width=16, topics=16, domains=8)
    assert r.steady_routers
    _, stream = synth.global_weights(r)
    basis = torch.cat([stream.mu[None], stream.topics, stream.domains])

    def along(recipe: synth.Recipe) -> float:
        w = synth.layer_weights(recipe, 1, stream)
        writes = [t for k, t in w.items() if k.endswith(("down_proj.weight", "o_proj.weight"))]
        return max(float((basis @ t).norm() / t.norm()) for t in writes)

    assert along(r) < 1e-5
    assert along(replace(r, steady_routers=False)) > 0.5


def test_bf16_experts_stream_half_the_bytes_and_match_the_resident_model(bf16_model,
                                                                         tiny_model):
    ckpt = Checkpoint(bf16_model)
    assert ckpt.dtype == torch.bfloat16 and ckpt.name == "strata-tiny-4x16-v2-bf16"
    assert ckpt.expert_bytes * 2 == Checkpoint(tiny_model).expert_bytes
    cfg = Config(model=str(bf16_model), expert_cache=6, prefetch="stale", io_workers=2,
                 io_urgent=1, device="cpu")
    engine = Engine(ckpt, cfg, torch.device("cpu"))
    resident = Resident(ckpt, cfg.context, torch.device("cpu"))
    token = 7
    try:
        for pos in range(30):
            a, b = engine.step(token, pos), resident.step(token, pos)
            assert a.dtype == torch.float32 and torch.equal(a, b), f"step {pos}"
            token = int(torch.argmax(a))
    finally:
        engine.close()


def test_bf16_weights_are_the_fp32_weights_rounded(bf16_model, tiny_model):
    """The same model in another dtype: next-token choices agree with the float32 one."""
    from tuner.measure.quality import compare

    r = compare(Checkpoint(tiny_model), Checkpoint(bf16_model), torch.device("cpu"), 24)
    assert r["top1_agreement_pct"] >= 90 and r["mean_kl"] < 0.01
