"""The quality probe: KL 0 and full agreement where nothing is lossy, counters equal to an
independent recomputation, and a served state the probe leaves as it found it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from tuner.engine.session.session import Session
from tuner.engine.step.reference import Resident
from tuner.engine.step.route_log import RouteLog
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config


@pytest.fixture
def cfg(small_model) -> Config:
    return Config(model=str(small_model), expert_cache=8, io_workers=3, io_urgent=1,
                  temperature=0.0)


def test_nothing_lossy_means_kl_zero_full_agreement_and_the_same_output(cfg, run):
    probed = run(replace(cfg, quality_every=1), 30)
    t, decoded = probed["totals"], probed["phases"]["decode"]["tokens"]
    # the probe compares decoded tokens: the prompt's next tokens are not sampled
    assert (t["q_tokens"], t["quality_kl"], t["top1_agreement"]) == (decoded, 0.0, 100.0)
    assert 0 < decoded < 30
    assert t["rerouted"] == 0 and t["q_bytes"] > 0
    assert probed["output_hash"] == run(cfg, 30)["output_hash"]


def _served_state(snap: dict) -> tuple:
    """What read timing cannot move (the timely/late split, partial reads and times can):
    the output, residency and the counts of what was routed, read, dropped and predicted."""
    keys = ("lookups", "hits", "sync_misses", "pf_issued", "evictions", "resident",
            "bytes_demand", "dropped", "dropped_mass", "bytes_dropped", "rerouted",
            "prev_slots", "stale_slots", "ctrl_slots")
    return snap["output_hash"], [tuple(row[k] for k in keys) for row in snap["layers"]]


def test_the_probe_leaves_the_served_state_alone_under_lossy_settings(cfg, run):
    # 5 slots of the 6 experts a token routes: misses, so drops and reroutes, every token
    lossy = replace(cfg, expert_cache=5, moce_bonus=0.85, moce_protect=1, drop_cold=0.2,
                    prefetch="stale")
    probed = run(replace(lossy, quality_every=2), 40)
    decoded = probed["phases"]["decode"]["tokens"]  # the prompt was batched: no steps
    assert probed["totals"]["q_tokens"] == len(range(0, decoded, 2))
    assert probed["totals"]["quality_kl"] > 0
    assert _served_state(probed) == _served_state(run(lossy, 40))


def test_quality_counters_equal_an_independent_recomputation(cfg, small_model):
    """Before each token the served KV cache is copied into a fully resident model, which
    computes the exact next-token distribution; KL, agreement and rerouted slots are then
    recomputed by hand from it, the served logits and the routing log."""
    # fresh conversations on new topics: residency from the last one reroutes a few experts
    lossy = replace(cfg, moce_bonus=5.0, moce_protect=0, quality_every=1, workload="chat-cold")
    s = Session(lossy)
    ref = Resident(Checkpoint(small_model), lossy.context, s.device)
    eng, mc = s.engine, s.ckpt.config
    eng.route_log = log = RouteLog(mc.num_layers, keep_logits=True)
    exact, served = [], []
    real_step = eng.step

    def step(token: int, pos: int) -> torch.Tensor:
        ref.dec.k_cache.copy_(eng.dec.k_cache)
        ref.dec.v_cache.copy_(eng.dec.v_cache)
        exact.append(ref.step(token, pos).double().log_softmax(-1))
        out = real_step(token, pos)
        served.append(out.double().log_softmax(-1))
        return out

    eng.step = step
    try:
        s.run(64)
        snap = s.snapshot()
    finally:
        eng.close()
    t, decoded = snap["totals"], snap["phases"]["decode"]["tokens"]
    # with a routing log the prompt goes token by token through `step` too, unprobed
    assert len(exact) == 64 and 0 < decoded < 64
    pairs = list(zip(exact, served))[-decoded:]
    kl = sum(float((p.exp() * (p - q)).sum()) for p, q in pairs)
    agree = sum(int(p.argmax()) == int(q.argmax()) for p, q in pairs)
    assert t["q_tokens"] == decoded
    assert t["q_agree"] == agree
    assert t["quality_kl"] == pytest.approx(kl / decoded, rel=1e-3)
    assert t["quality_kl"] > 0
    rerouted = sum(mc.top_k - len(set(sel) & set(np.argsort(-logits)[:mc.top_k].tolist()))
                   for sel, logits in zip(log.experts, log.logits))
    assert t["rerouted"] == rerouted > 0


def test_run_prints_the_quality_figures_when_the_probe_is_on(small_model, capsys):
    from tuner.cli import main

    assert main(["run", "--model", str(small_model), "--tokens", "24", "--expert-cache", "8",
                 "--drop-cold", "0.3", "--quality-every", "2"]) == 0
    out = capsys.readouterr().out
    assert "over 4 compared tokens; the exact pass (" in out
    assert "note: drop_cold is on: the predictors are scored against the experts computed" \
        in out
