"""The live engine driven by a routing trace (`routing` knob): it routes as the trace says,
looping, and counts exactly what replay counts."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tuner.cli import main
from tuner.engine.session.session import Session
from tuner.knobs import Config
from tuner.traces.record import record
from tuner.traces.replay import replay
from tuner.traces.stats import trace_stats
from tuner.vocabulary import trace_format
from tuner.vocabulary.trace_format import Trace

FIXTURES = Path(__file__).parent.parent / "traces" / "fixtures"


@pytest.fixture
def recorded(tiny_config, tmp_path) -> tuple[Path, Trace]:
    """A tiny-model trace of several sequences, with router logits and stale-gate scores."""
    trace, _ = record(replace(tiny_config, context=24), 60, logits=True)
    path = tmp_path / "tiny.npz"
    trace_format.save(trace, path)
    return path, trace


def looped(trace: Trace, tokens: int) -> Trace:
    """The first `tokens` tokens of the trace played over and over."""
    index = np.arange(tokens) % trace.tokens
    starts = [t for t in range(tokens) if t % trace.tokens in trace.sequence_starts]
    return Trace(trace.experts[index], {**trace.meta, "sequence_starts": starts},
                 stale=trace.stale[index])


@pytest.mark.parametrize("changes", [{}, {"cache_policy": "2q"}, {"expert_cache": 6}])
def test_a_driven_session_counts_what_replay_counts(tiny_config, recorded, changes, run):
    path, trace = recorded
    tokens = trace.tokens + 25  # once through, then around again
    cfg = replace(tiny_config, routing=str(path), seed=7, temperature=1.0, **changes)
    snap = run(cfg, tokens)
    want = looped(trace, tokens)
    got = replay(want, snap["arena"]["policy"], snap["arena"]["slots"])
    assert [(r["lookups"], r["hits"], r["sync_misses"]) for r in snap["layers"]] == list(
        zip(got.lookups.tolist(), got.hits.tolist(), got.misses.tolist()))
    # the predictors see the trace's sequences and the trace's stale-gate scores
    stats = trace_stats(want)
    assert snap["totals"]["prev_pct"] == stats["totals"]["prev_pct"]
    assert snap["totals"]["stale_pct"] == stats["totals"]["stale_pct"]
    assert snap["totals"]["ctrl_pct"] == 100.0  # the trace's own logits rank its routings


def test_prefetch_and_io_knobs_stay_live_and_never_change_the_routing(tiny_config, recorded,
                                                                        run):
    path, trace = recorded
    cfg = replace(tiny_config, routing=str(path))
    plain = run(cfg, trace.tokens)
    busy = run(replace(cfg, prefetch="stale", prefetch_max=0, io_jitter_ms=1.0),
                 trace.tokens)
    assert busy["totals"]["pf_issued"] > 0
    assert [r["lookups"] for r in busy["layers"]] == [r["lookups"] for r in plain["layers"]]
    assert busy["output_hash"] == plain["output_hash"]


def test_an_imported_trace_without_scores_turns_their_users_off(tmp_path, run):
    src = tmp_path / "trace.npz"
    assert main(["trace", "import", "vllm", str(FIXTURES / "vllm"), "-o", str(src)]) == 0
    model = tmp_path / "like"
    assert main(["model", "make", "--like", str(src), "--hidden-size", "32",
                 "--expert-width", "16", "--out", str(model)]) == 0
    trace = trace_format.load(src)
    snap = run(Config(model=str(model), routing=str(src), expert_cache=6, io_workers=2,
                        io_urgent=1, prefetch="stale", moce_bonus=1.0), 2 * trace.tokens)
    assert snap["model"]["layers"] == 2 and snap["model"]["experts"] == 16
    assert snap["totals"]["lookups"] == 2 * int((trace.experts >= 0).sum())
    assert snap["totals"]["pf_issued"] == 0 and snap["totals"]["stale_pct"] is None
    assert snap["totals"]["ctrl_pct"] is None
    assert any("no stale-gate scores" in n for n in snap["notes"])
    assert any("no router logits: moce" in n for n in snap["notes"])


def test_a_trace_of_another_shape_is_refused_with_the_way_out(tiny_config, tmp_path):
    src = tmp_path / "trace.npz"
    assert main(["trace", "import", "vllm", str(FIXTURES / "vllm"), "-o", str(src)]) == 0
    with pytest.raises(ValueError, match=r"2 layers x 16 experts, top-2; the model has 4 x "
                       r"16, top-4\. Make a model of the trace's shape with `tuner model make "
                       r"--like"):
        Session(replace(tiny_config, routing=str(src)))


def test_routing_is_switched_on_in_a_running_session(tiny_config, recorded):
    path, trace = recorded
    s = Session(tiny_config)
    try:
        s.run(5)
        version = s.submit(replace(tiny_config, routing=str(path)))
        s.run(trace.tokens)
        snap = s.snapshot()
    finally:
        s.engine.close()
    assert snap["settings_version"] == version and snap["changes"][-1]["rebuilt"]
    assert any(n.startswith("routing from tuner") for n in snap["notes"])
    got = replay(trace, "lru", snap["arena"]["slots"])
    assert snap["totals"]["hits"] == int(got.hits.sum())


def test_a_driven_session_drops_and_probes_quality_too(tiny_config, recorded, run):
    """drop_cold weighs the trace's routings by the model's own router; the quality probe
    compares them with the model's exact routing."""
    path, trace = recorded
    snap = run(replace(tiny_config, routing=str(path), drop_cold=0.3, quality_every=1), 40)
    t = snap["totals"]
    assert t["dropped"] > 0 and t["quality_kl"] > 0
    assert t["q_tokens"] == snap["phases"]["decode"]["tokens"] > 0  # decoded tokens only
    assert t["lookups"] == t["hits"] + t["sync_misses"] + t["dropped"]
