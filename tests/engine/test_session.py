"""Engine invariants on the tiny model: determinism, bit-identity at bonus 0, counters that
add up, timing that never leaks into residency, live settings."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch

from tests.engine.resident_match import streaming_matches_resident
from tuner.engine.session.session import Session
from tuner.knobs import Config
from tuner.vocabulary.counters import COUNTERS, PF_CLASSES, PHASES, C, Counters

TOKENS = 120


def counts(snap: dict) -> list[tuple]:
    keys = ("lookups", "hits", "sync_misses", "pf_issued", "evictions", "resident")
    return [tuple(row[k] for k in keys) for row in snap["layers"]]


def test_same_settings_same_tokens_and_counters(tiny_config, run):
    a, b = run(tiny_config), run(tiny_config)
    assert a["output_hash"] == b["output_hash"]
    assert counts(a) == counts(b)


@pytest.mark.parametrize("changes", [
    {"expert_cache": 6}, {"expert_cache": 40}, {"expert_cache": 64}, {"cache_policy": "2q"},
    {"prefetch": "stale"}, {"prefetch": "stale", "prefetch_max": 0}, {"prefetch": "prev"},
    {"prefetch": "stale", "cache_policy": "2q", "prefetch_touch": True},
    {"io_workers": 1, "io_urgent": 0, "io_piece_kib": 4}, {"io_direct": True},
    {"moce_protect": 0, "prefetch_route": True}, {"expert_store": "ram"},
    {"expert_store": "ram", "miss_direct": False},
    {"expert_store": "ram", "prefetch": "stale", "prefetch_max": 0},
])
def test_bonus_zero_output_is_bit_identical(tiny_config, run, changes):
    base = run(tiny_config)
    other = run(replace(tiny_config, **changes))
    assert other["output_hash"] == base["output_hash"]


def test_bonus_changes_output_and_raises_hit_rate(tiny_config, run):
    base = run(tiny_config, 200)
    moce = run(replace(tiny_config, moce_bonus=0.85), 200)
    assert moce["output_hash"] != base["output_hash"]
    assert moce["totals"]["hit_rate"] > base["totals"]["hit_rate"] + 5


@pytest.mark.parametrize("prefetch", ["off", "stale"])
def test_counters_add_up(tiny_config, run, prefetch):
    snap = run(replace(tiny_config, prefetch=prefetch, prefetch_max=0))
    for row in snap["layers"]:
        assert row["hits"] + row["sync_misses"] + row["pf_late"] + row["pf_timely"] \
            == row["lookups"]
        assert row["pf_issued"] == sum(row[c.name] for c in PF_CLASSES)  # drained at the end
    for col in COUNTERS:
        total = sum(row[col.name] for row in snap["layers"])
        rounding = 0.01 if col.unit == "ms" else 0  # rows and totals round ms to 3 places
        assert snap["totals"][col.name] == pytest.approx(total, abs=rounding)
    assert snap["totals"]["routings"] == TOKENS * snap["model"]["layers"] * snap["model"]["top_k"]
    if prefetch == "stale":
        assert snap["totals"]["pf_issued"] > 0


def test_read_timing_never_leaks_into_residency(tiny_config, run):
    """Random delays in every read: the same residency and hit/miss counts; only the
    timely/late split, partial/cancelled split and stall times may move."""
    cfg = replace(tiny_config, prefetch="stale", prefetch_max=0, ssd_gbps=2.0)
    calm = run(cfg)
    noisy = run(replace(cfg, io_jitter_ms=3.0, io_workers=2, io_urgent=1))
    assert noisy["output_hash"] == calm["output_hash"]
    assert counts(noisy) == counts(calm)
    for a, b in zip(calm["layers"], noisy["layers"]):
        assert a["pf_late"] + a["pf_timely"] == b["pf_late"] + b["pf_timely"]


def test_arena_bytes_equal_the_checkpoint(tiny_config):
    s = Session(tiny_config)
    try:
        s.run(20)
        eng = s.engine
        for slot, key in enumerate(eng.slots.key):
            if key is not None and eng.slots.state[slot] == "resident":
                assert torch.equal(eng.arena.mem[slot].cpu(), s.ckpt.expert_tensor(*key))
    finally:
        s.engine.close()


def test_window_counts_only_recent_tokens(tiny_config, run):
    snap = run(replace(tiny_config, window=10), 50)
    assert snap["window"]["tokens"] == 10
    assert snap["window"]["totals"]["lookups"] == 10 * 4 * 4


def test_the_window_is_one_span_of_tokens_for_every_view(tiny_config):
    """The counters, the per-expert counts and the routings the slot gains and budgets
    replay cover the same tokens: `window` of them, more only while a prefilled prompt
    (one step, kept whole) straddles the window's start."""
    s = Session(replace(tiny_config, window=20, context=40))
    seen = set()
    try:
        for _ in range(30):
            s.run(3)
            tokens = s.snapshot()["window"]["tokens"]
            assert s.experts(True)["tokens"] == tokens
            assert len(s.engine.counters.window_routings()) == tokens
            if s.tokens >= 20:
                assert 20 <= tokens < 20 + 16  # the corpus's prompts are 16 tokens
            seen.add(tokens)
    finally:
        s.engine.close()
    assert 20 in seen and max(seen) > 20  # steady decode, and a prompt at the window's start


def test_counts_made_after_a_step_join_it_and_leave_the_window_with_it():
    """The engine counts a token's probe and layer times under the next token's first
    layers: they go to the token's own phase and window entry, or to the open step while
    nobody ended the token's."""
    c = Counters(layers=2, experts=4, top_k=1, window=8)
    decode, prefill, ms = PHASES.index("decode"), PHASES.index("prefill"), C.layer_ms.index
    c.end_token(0.1, 1, "decode")
    c.add(0, C.lookups)  # the next step's own, counted before the late ones
    with c.late(c.ended - 1):
        c.add(1, C.layer_ms, 5.0)
    c.end_token(0.1, 3, "prefill")
    window, _ = c.read_phases(window=True)
    assert window[decode, 1, ms] == 5.0 and window[prefill, 1, ms] == 0
    assert window[prefill, 0, C.lookups.index] == 1
    for _ in range(5):  # the decoded token leaves the window: its late counts with it
        c.end_token(0.1, 1, "decode")
    window, _ = c.read_phases(window=True)
    whole, _ = c.read_phases(window=False)
    assert window[decode, 1, ms] == 0 and whole[decode, 1, ms] == 5.0
    with c.late(c.ended):  # a step nobody ended yet (no session ends steps) takes them
        c.add(1, C.layer_ms, 2.0)
    assert c.cur[1, ms] == 2.0


def test_predictor_probe_scores(tiny_config, run):
    snap = run(tiny_config)
    layer0 = snap["layers"][0]
    assert layer0["stale_scored"] == 0 and layer0["stale_pct"] is None  # '-' not 0
    assert all(r["ctrl_pct"] == 100.0 for r in snap["layers"])
    # a batched prompt is unscored (its first token has no previous token; the rest are
    # routed together); every decoded token is scored
    assert snap["phases"]["prefill"]["prev_scored"] == 0
    assert snap["layers"][1]["prev_scored"] == snap["phases"]["decode"]["tokens"]


def test_live_change_applies_at_token_boundary(tiny_config):
    s = Session(tiny_config)
    s.start()
    try:
        v = s.submit(replace(tiny_config, cache_policy="2q", moce_bonus=0.5))
        assert s.wait_applied(v, 30)
        snap = s.snapshot()
        assert snap["settings_version"] == v
        assert snap["settings"]["cache_policy"] == "2q" and snap["arena"]["policy"] == "2q"
        assert snap["changes"][-1]["changed"]["moce_bonus"] == [0.0, 0.5]
        v2 = s.submit(replace(tiny_config, expert_cache=24))  # restart-class: rebuilds
        assert s.wait_applied(v2, 30)
        snap = s.snapshot()
        assert snap["arena"]["slots"] == 24 and snap["changes"][-1]["rebuilt"]
        s.pause()
        v3 = s.submit(replace(tiny_config, expert_cache=24, prefetch="stale"))
        assert s.wait_applied(v3, 30)  # a paused session still takes settings
        assert s.snapshot()["state"] == "paused"
    finally:
        s.stop()


def test_reset_counters(tiny_config):
    s = Session(tiny_config)
    s.run(10)
    s.reset_counters()
    s.run(3)
    assert s.snapshot()["tokens"] == 3
    s.engine.close()


def test_a_reset_can_be_waited_for(tiny_config):
    s = Session(tiny_config)
    s.start()
    try:
        assert s.wait_tokens(3, 30)
        assert s.reset_counters(wait=30)  # running: at the next boundary
        s.pause()
        assert s.reset_counters(wait=30) and s.tokens == 0  # paused: at once, and it stays
    finally:
        s.stop()


def test_engine_imports_no_ui_or_settings_library():
    code = ("import sys, tuner.engine.session.session, tuner.engine.step.decode;"
            "bad = [m for m in ('pydantic', 'pydantic_settings', 'textual', 'fastapi',"
            " 'uvicorn', 'starlette') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_routed_counts_match_lookups(tiny_config):
    s = Session(tiny_config)
    s.run(30)
    routed, missed, tokens = s.engine.counters.expert_counts(window=False)
    totals = s.snapshot()["totals"]
    assert (np.sum(routed), np.sum(missed), tokens) == (totals["routings"],
                                                         totals["sync_misses"], 30)
    s.engine.close()


def test_failed_rebuild_keeps_the_running_engine(tiny_config, tmp_path):
    bad = tmp_path / "not-a-model"
    bad.mkdir()
    (bad / "config.json").write_text('{"model_type": "llama"}')
    s = Session(tiny_config)
    s.start()
    try:
        v = s.submit(replace(tiny_config, model=str(bad)))
        assert s.wait_applied(v, 30)
        assert "model_type 'llama' is not supported" in s.rejection(v)
        snap = s.snapshot()
        assert snap["state"] == "running" and snap["settings"]["model"] == str(tiny_config.model)
        tokens = snap["tokens"]
        v2 = s.submit(replace(tiny_config, moce_bonus=0.3))
        assert s.wait_applied(v2, 30) and s.rejection(v2) is None
        assert s.wait_tokens(tokens + 1, 30)
    finally:
        s.stop()


def test_streaming_logits_equal_the_fully_resident_model(tiny_config, tiny_model):
    """Greedy decode through a small arena with speculation gives bit-identical logits."""
    streaming_matches_resident(tiny_config, tiny_model)


def test_text_prompt_and_output(tiny_config, tiny_model):
    from tuner.engine.weights import synth

    text = " ".join(synth.word(i) for i in (3, 40, 77))
    s = Session(replace(tiny_config, temperature=0.0), prompt=text)
    try:
        s.run(12)
        snap = s.snapshot()
    finally:
        s.engine.close()
    assert snap["text"]["prompt"] == text
    words = snap["text"]["output"].split()
    assert len(words) == 12 - 3 and all(w == synth.word(i) for w, i in
                                         zip(words, list(s.output_ids)))


def test_text_prompt_needs_a_tokenizer(tiny_config, tiny_model, tmp_path):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(tiny_model, bare)
    (bare / "tokenizer.json").unlink()
    with pytest.raises(ValueError, match="no tokenizer.json"):
        Session(replace(tiny_config, model=str(bare)), prompt="ka lo")
    s = Session(replace(tiny_config, model=str(bare)), prompt_ids=[1, 2, 3])
    s.run(2)
    assert s.snapshot()["text"] is None
    s.engine.close()


def test_run_command_prints_output_ids(tiny_model, capsys):
    import json

    from tuner.cli import main

    assert main(["run", "--model", str(tiny_model), "--tokens", "6", "--prompt-ids", "1,2,3",
                 "--temperature", "0", "--json", "--expert-cache", "16"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["output_ids"]) == 3 and out["tokens"] == 6
    assert {"schema", "output_hash", "settings_version", "settings", "totals", "layers"} <= \
        out.keys()


@pytest.mark.parametrize("threads", [0, 2])
def test_the_thread_count_changes_speed_not_output(small_model, run, threads):
    """At real layer shapes, where a kernel could split its sums over threads."""
    cfg = Config(model=str(small_model), expert_cache=6, device="cpu")
    assert run(replace(cfg, threads=threads), 40)["output_hash"] == run(cfg, 40)["output_hash"]


def test_wait_tokens_returns_once_counted_and_gives_up_when_stopped(tiny_config):
    session = Session(tiny_config)
    session.start()
    try:
        assert session.wait_tokens(20, timeout=60)
        assert session.tokens >= 20
    finally:
        session.stop()
    # a stopped session never gets there: with no timeout, only giving up returns
    assert not session.wait_tokens(10**9)


@pytest.mark.parametrize("cpu_pool", [False, True])
def test_per_expert_counts_add_up_to_the_layer_counters(tiny_config, cpu_pool):
    """Window and cumulative routings and misses per (layer, expert) sum to each layer's
    routings and sync misses, after the window has moved past its first tokens."""
    cfg = replace(tiny_config, window=4, cpu_pool=cpu_pool, pcie_frac=0.5)
    s = Session(cfg)
    s.run(23)
    snap = s.snapshot()
    for window, rows in ((True, snap["window"]["layers"]), (False, snap["layers"])):
        data = s.experts(window)
        assert data["tokens"] == (4 if window else 23)
        assert [sum(r) for r in data["routings"]] == [r["routings"] for r in rows]
        assert [sum(r) for r in data["misses"]] == [r["sync_misses"] for r in rows]
        assert all(m <= r for rr, mm in zip(data["routings"], data["misses"])
                   for r, m in zip(rr, mm))
    assert s.experts(True)["resident"] is None  # asked for: taken at the next boundary
    s.run(1)
    data = s.experts(True)
    assert data["resident_at_token"] == 24
    assert [sum(r) for r in data["resident"]] == [r["resident"] for r in s.snapshot()["layers"]]
    assert len(s.engine.counters.routings()) == 8  # twice the window of routings kept
    s.engine.close()
