"""The .npz exchange format: round trip, and errors that say what is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tuner.vocabulary import trace_format
from tuner.vocabulary.trace_format import Trace, TraceError


def sample() -> Trace:
    experts = np.array([[[0, 2], [1, -1]], [[3, 1], [0, 2]]], dtype=np.int32)  # [2, 2, 2]
    logits = np.arange(2 * 2 * 4, dtype=np.float32).reshape(2, 2, 4)
    probs = np.full((2, 2, 2), 0.5, dtype=np.float32)
    stale = logits + 1
    stale[:, 0] = np.nan  # layer 0 has no earlier input
    meta = {"model": "m", "num_experts": 4, "expert_bytes": 10, "source": "test",
            "sequence_starts": [0]}
    return Trace(experts, meta, logits, probs, stale)


def test_round_trip(tmp_path):
    path = tmp_path / "t.npz"
    trace_format.save(sample(), path)
    back = trace_format.load(path)
    assert np.array_equal(back.experts, sample().experts)
    assert np.array_equal(back.logits, sample().logits)
    assert np.array_equal(back.probs, sample().probs)
    assert np.array_equal(back.stale, sample().stale, equal_nan=True)
    assert back.meta == sample().meta
    assert (back.tokens, back.layers, back.top_k, back.num_experts) == (2, 2, 2, 4)
    assert back.rows() == [[[0, 2], [1]], [[3, 1], [0, 2]]]


def test_save_keeps_the_given_name(tmp_path):
    path = tmp_path / "trace.data"
    trace_format.save(sample(), path)
    assert path.is_file() and not (tmp_path / "trace.data.npz").exists()


def id_too_big(t: Trace) -> None:
    t.experts[0, 0, 0] = 4


def id_below_empty(t: Trace) -> None:
    t.experts[0, 0, 1] = -2


def id_twice(t: Trace) -> None:
    t.experts[1, 0, 1] = 3


def no_num_experts(t: Trace) -> None:
    del t.meta["num_experts"]


def logits_too_wide(t: Trace) -> None:
    t.logits = np.zeros((2, 2, 5))


def stale_too_narrow(t: Trace) -> None:
    t.stale = np.zeros((2, 2, 3))


def probs_too_wide(t: Trace) -> None:
    t.probs = np.zeros((2, 2, 3))


def experts_flat(t: Trace) -> None:
    t.experts = np.zeros((2, 2))


def no_tokens(t: Trace) -> None:
    t.experts = np.zeros((0, 2, 2), dtype=np.int32)


def experts_beyond_any_model(t: Trace) -> None:
    t.meta["num_experts"] = 10**12


def negative_expert_bytes(t: Trace) -> None:
    t.meta["expert_bytes"] = -1


def a_start_past_the_end(t: Trace) -> None:
    t.meta["sequence_starts"] = [0, 2]


def integer_logits(t: Trace) -> None:
    t.logits = np.zeros((2, 2, 4), dtype=np.int64)


@pytest.mark.parametrize("change, message", [
    (id_too_big, r"expert id 4 at token 0, layer 0, rank 0; allowed: -1 \(empty\) or 0\.\.3"),
    (id_below_empty, "expert id -2"),
    (id_twice, "token 1, layer 0 names expert 3 twice"),
    (no_num_experts, "'num_experts' must be an integer from 1 to 65,536, got None"),
    (experts_beyond_any_model, "'num_experts' must be an integer from 1 to 65,536, got "
                               "1000000000000"),
    (no_tokens, r"shape \(0, 2, 2\); a trace holds at least one token"),
    (negative_expert_bytes, "'expert_bytes' must be an integer >= 0 .* got -1"),
    (a_start_past_the_end, "'sequence_starts' must be a list of token indices from 0 to 1"),
    (integer_logits, "'logits' must be a float array, got int64"),
    (logits_too_wide, r"'logits' has shape \(2, 2, 5\)"),
    (stale_too_narrow, r"'stale' has shape \(2, 2, 3\); with experts \(2, 2, 2\) and "
                       r"num_experts 4 it must be \(2, 2, 4\)"),
    (probs_too_wide, r"must be \(2, 2, 2\)"),
    (experts_flat, r"integer array \[tokens, layers, k\]"),
])
def test_check_names_the_problem(change, message):
    trace = sample()
    change(trace)
    with pytest.raises(TraceError, match=message):
        trace.check()


def test_load_rejects_what_is_not_a_trace(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        trace_format.load(tmp_path / "missing.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(TraceError, match="not a trace"):
        trace_format.load(tmp_path / "text.npz")
    (tmp_path / "r.csv").write_text("layer,token,experts\n0,0,1 2\n")  # a route log
    with pytest.raises(TraceError, match="not a trace") as err:
        trace_format.load(tmp_path / "r.csv")
    assert "tuner trace import jsonl|vllm|csv" in str(err.value)
    assert "pickle" not in str(err.value)  # never a hint to load it unsafely
    np.savez(tmp_path / "other.npz", routes=np.zeros(3))
    with pytest.raises(TraceError, match="a trace holds 'experts' and 'meta'"):
        trace_format.load(tmp_path / "other.npz")
    np.savez(tmp_path / "badmeta.npz", experts=np.zeros((1, 1, 1), dtype=np.int32),
             meta=np.array(json.dumps([1, 2])))
    with pytest.raises(TraceError, match="'meta' must be a JSON object"):
        trace_format.load(tmp_path / "badmeta.npz")
