"""drop-cold-experts (seed 001): what is dropped, what is always kept, what prefetch skips,
and counters that add up."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from tuner.engine.session.session import Session
from tuner.engine.step import drop, layer_work
from tuner.engine.step.speculate import Speculator


def test_kept_keeps_present_experts_heavy_misses_and_the_top_one():
    w = np.array([0.05, 0.6, 0.3, 0.05])
    assert drop.kept(w, [False, False, False, False], 0.1) == [1, 2]
    assert drop.kept(w, [True, False, False, False], 0.1) == [0, 1, 2]  # resident: computed
    # a threshold above every weight still keeps the top-weighted expert, wherever it ranks
    assert drop.kept(w, [False] * 4, 0.9) == [1]
    assert drop.kept(w, [False] * 4, 0.0) == [0, 1, 2, 3]


def test_speculable_skips_light_predictions_but_never_the_top_one():
    guess = [7, 3, 9]
    assert drop.speculable(guess, np.array([0.2, 0.7, 0.1]), 0.15) == [7, 3]
    assert drop.speculable(guess, np.array([0.2, 0.7, 0.1]), 0.95) == [3]
    assert drop.speculable([], np.array([]), 0.5) == []


def test_share_is_the_softmax_of_the_selected_scores():
    s = np.array([2.0, 1.0, -1.0], dtype=np.float32)
    assert drop.share(s) == pytest.approx(torch.tensor(s).double().softmax(-1).numpy())


@pytest.fixture
def record(monkeypatch):
    """Every routing the engine's drop decided: (weights, present, kept ranks)."""
    seen = []
    real = drop.kept

    def spy(weights, present, threshold):
        out = real(weights, present, threshold)
        seen.append((weights.copy(), list(present), out, threshold))
        return out

    monkeypatch.setattr(drop, "kept", spy)
    return seen


def test_drop_never_removes_the_top_weighted_expert_and_counts_add_up(tiny_config, record):
    cfg = replace(tiny_config, drop_cold=0.3, temperature=0.0)
    s = Session(cfg)
    try:
        s.run(40)
        snap = s.snapshot()
    finally:
        s.engine.close()
    assert record, "drop_cold decided nothing"
    dropped = mass = 0.0
    for weights, present, kept, threshold in record:
        assert int(np.argmax(weights)) in kept
        gone = [r for r in range(len(weights)) if r not in kept]
        assert all(not present[r] and weights[r] < threshold for r in gone)
        dropped += len(gone)
        mass += weights[gone].sum()
    t = snap["totals"]
    assert t["dropped"] == dropped > 0
    assert t["dropped_mass"] == pytest.approx(mass, abs=1e-3)
    assert t["bytes_dropped"] == dropped * snap["model"]["expert_bytes"]
    assert t["lookups"] == t["hits"] + t["sync_misses"] + t["pf_timely"] + t["pf_late"] + \
        t["dropped"]
    # the predictors are scored against what was computed: the control falls below 100 %
    assert t["ctrl_pct"] < 100
    assert any("read prev and stale against ctrl" in n for n in snap["notes"])


def test_drop_aware_prefetch_never_speculates_an_expert_it_would_drop(tiny_config,
                                                                       monkeypatch):
    predicted, issued = [], []
    real_predict, real_issue = layer_work.predict, Speculator.issue

    def spy_predict(cfg, k, prev, stale, resident):
        guess = real_predict(cfg, k, prev, stale, resident)
        predicted.append((guess, stale.numpy().copy()))
        return guess

    def spy_issue(self, cfg, target, guess):
        issued.append(list(guess))
        return real_issue(self, cfg, target, guess)

    monkeypatch.setattr(layer_work, "predict", spy_predict)
    monkeypatch.setattr(Speculator, "issue", spy_issue)
    threshold = 0.15
    cfg = replace(tiny_config, drop_cold=threshold, prefetch="stale", prefetch_max=0,
                  temperature=0.0)
    s = Session(cfg)
    try:
        s.run(30)
        t = s.snapshot()["totals"]
    finally:
        s.engine.close()
    assert len(predicted) == len(issued) > 0 and t["pf_issued"] > 0
    skipped = 0
    for (guess, stale), sent in zip(predicted, issued):
        weights = torch.tensor(stale[guess]).double().softmax(-1).numpy()
        top = guess[int(np.argmax(weights))]
        assert top in sent
        for e in sent:
            assert e == top or weights[guess.index(e)] >= threshold
        skipped += len(guess) - len(sent)
    assert skipped > 0, "the threshold never skipped a prediction: the test proves nothing"
