"""Batched prefill: what holds against the token-by-token path, the per-phase counters, the
prefill policy (layer-ranked streaming, prompt-hot protection) and the residency check."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tuner.engine.session.session import Session
from tuner.engine.step.prefill import prompt_cap, tail_reserve
from tuner.knobs import Config
from tuner.vocabulary.counters import COUNTERS, PHASES

PROMPT = list(range(3, 200, 5))  # 40 tokens, a batched prompt


def finish(cfg: Config, tokens: int, **kwargs) -> tuple[Session, dict]:
    s = Session(cfg, **kwargs)
    s.run(tokens)
    snap = s.snapshot()
    s.engine.close()
    return s, snap


@pytest.mark.parametrize("fixture", ["tiny_config", "small"])
def test_batched_prefill_agrees_with_the_token_by_token_path(request, fixture):
    """Batched matrix products round differently from one token's on the CPU: the same
    greedy tokens, the prompt's last logits within 1e-4, and each path bit-identical with
    itself."""
    if fixture == "small":
        model = request.getfixturevalue("small_model")
        cfg = Config(model=str(model), expert_cache=6, io_workers=2, io_urgent=1)
    else:
        cfg = request.getfixturevalue(fixture)
    cfg = replace(cfg, temperature=0.0)
    prompt = [t % 256 for t in PROMPT]
    runs = {}
    for batched in (True, False, True):
        s, snap = finish(replace(cfg, prefill=batched), len(prompt) + 24, prompt_ids=prompt)
        runs.setdefault(batched, []).append((list(s.output_ids), s.conversation.logits, snap))
    (ids_b, logits_b, snap_b), (ids_again, _, again) = runs[True]
    (ids_t, logits_t, snap_t), = runs[False]
    assert ids_b == ids_t and len(ids_b) == 24
    assert torch.allclose(logits_b, logits_t, atol=1e-4, rtol=0)
    assert (ids_again, again["output_hash"]) == (ids_b, snap_b["output_hash"])
    assert snap_b["phases"]["prefill"]["prompt_streamed"] > 0
    assert snap_t["phases"]["prefill"]["prompt_streamed"] == 0  # no batch, no union


def test_a_batched_prompt_reads_each_expert_once_per_layer(tiny_config):
    _, snap = finish(replace(tiny_config, prefetch="stale"), len(PROMPT), prompt_ids=PROMPT)
    pre = snap["phases"]["prefill"]
    assert pre["pf_issued"] == 0  # no read-ahead of predicted candidates in a batch
    assert pre["tokens"] == len(PROMPT) and pre["prompts"] == 1
    assert pre["routings"] == len(PROMPT) * 4 * 4  # every token's top-4 in 4 layers
    assert pre["lookups"] == pre["prompt_streamed"] + pre["prompt_through"] <= 4 * 16
    assert pre["ttft_ms"] == pytest.approx(1000 * pre["seconds"], abs=0.1)
    assert snap["phases"]["decode"]["tokens"] == 0


def test_phase_counters_add_up_separately_and_together(tiny_config):
    _, snap = finish(replace(tiny_config, prefetch="stale", prefetch_max=0,
                             workload="chat-warm"), 150)
    phases = snap["phases"]
    assert all(phases[p]["tokens"] for p in PHASES)
    assert phases["prefill"]["tokens"] + phases["decode"]["tokens"] == snap["tokens"] == 150
    for col in COUNTERS:
        rounding = 0.01 if col.unit == "ms" else 0
        assert phases["prefill"][col.name] + phases["decode"][col.name] == pytest.approx(
            snap["totals"][col.name], abs=rounding)
    for t in phases.values():
        assert t["hits"] + t["sync_misses"] + t["pf_late"] + t["pf_timely"] == t["lookups"]
    assert snap["totals"]["pf_issued"] == sum(snap["totals"][c] for c in (
        "pf_cancelled", "pf_partial", "pf_unused", "pf_late", "pf_timely"))


def test_prompt_max_pre_caps_what_a_prompt_streams_into_the_arena(tiny_config):
    _, wide = finish(tiny_config, len(PROMPT), prompt_ids=PROMPT)
    _, capped = finish(replace(tiny_config, prompt_max_pre=2), len(PROMPT),
                       prompt_ids=PROMPT)
    for w, c in zip(wide["layers"], capped["layers"]):
        assert c["prompt_streamed"] == min(2, w["lookups"])
        assert c["prompt_streamed"] + c["prompt_through"] == w["lookups"]
    assert capped["totals"]["resident"] <= 4 * 2  # experts past the cap are not kept
    # the seed's 256 / 128 of 512 experts, layer 40 of 48, scaled
    cfg = Config()
    assert [prompt_cap(cfg, l, 48, 512) for l in (0, 39, 40, 47)] == [256, 256, 128, 128]
    assert [prompt_cap(cfg, l, 16, 64) for l in (12, 13)] == [32, 16]
    assert prompt_cap(replace(cfg, prompt_max_pre=7), 0, 48, 512) == 7


def test_prompt_hot_protection_leaves_the_tail_reserved(tiny_config):
    """A 40-slot arena: the prompt-hot set protects at most 40 - (2*4 + 32) = 0 slots, so
    protection never changes a victim; a larger arena protects and falls back."""
    assert tail_reserve(4) == 40
    cfg = replace(tiny_config, expert_cache=60)
    s = Session(cfg, prompt_ids=PROMPT)
    seen = []
    original = s.engine.slots.victim

    def victim(avoid_layer=None, layer=None):
        seen.append(len(s.engine.slots.protected))
        return original(avoid_layer, layer)

    s.engine.slots.victim = victim
    s.run(len(PROMPT))
    snap = s.snapshot()
    s.engine.close()
    assert seen and max(seen) <= 60 - tail_reserve(4)
    assert max(seen) > 0 and not s.engine.slots.protected  # cleared after the prompt
    off, _ = finish(replace(cfg, prompt_hot=False), len(PROMPT), prompt_ids=PROMPT)
    assert snap["totals"]["hot_fallbacks"] >= 0 and off.snapshot()["totals"]["hot_fallbacks"] == 0


def test_residency_check_counts_windows_and_finds_no_mismatch(tiny_config):
    _, snap = finish(replace(tiny_config, adapt_checkres=True, prefetch="stale"), 60)
    steps = snap["phases"]["decode"]["tokens"] + snap["phases"]["prefill"]["prompts"]
    assert snap["totals"]["checkres_windows"] == 4 * steps
    assert snap["totals"]["checkres_mismatches"] == 0


def test_adapt_overlap_turns_adapt_fetch_off_with_a_note(tiny_config):
    cfg = replace(tiny_config, cpu_pool=True, pcie_frac=0.5, adapt_fetch=2, adapt_overlap=True)
    s, snap = finish(cfg, 30)
    assert not s.engine.adapt_fetch and snap["totals"]["admissions"] == 0
    assert any(n.startswith("adapt_fetch is off: adapt_overlap = 1") for n in snap["notes"])
    assert any(n.startswith("prompts run token by token") for n in snap["notes"])


def test_decode_from_the_same_kv_cache_is_bit_identical_after_either_prefill(small_model):
    """What differs between the paths is the KV cache's last bits: decode from the same cache
    gives the same bits whichever path filled it and whatever the arena holds."""
    cfg = Config(model=str(small_model), expert_cache=6, io_workers=2, io_urgent=1,
                 temperature=0.0)
    sessions = [Session(replace(cfg, prefill=batched), prompt_ids=PROMPT)
                for batched in (True, False)]
    for s in sessions:
        s.run(len(PROMPT))
    batched, per_token = sessions
    assert not torch.equal(batched.engine.dec.k_cache, per_token.engine.dec.k_cache)
    per_token.engine.dec.k_cache.copy_(batched.engine.dec.k_cache)
    per_token.engine.dec.v_cache.copy_(batched.engine.dec.v_cache)
    per_token.conversation.logits = batched.conversation.logits
    for s in sessions:
        s.run(8)
        s.engine.close()
    assert list(batched.output_ids) == list(per_token.output_ids)
    assert torch.equal(batched.conversation.logits, per_token.conversation.logits)
