"""Seed 000's rules on constructed runs: each rule's pass, reject and n/a, and a verdict
that names the rule that rejects."""

from __future__ import annotations

import json

import pytest

from tuner.cli import main
from tuner.errors import Exit
from tuner.measure.rules import (
    ArmFigures,
    Bonus0Output,
    ExposedWaits,
    SyncMisses,
    evaluate,
    ruleset,
    verdict,
)


def arm(sync=10.0, hits=20.0, stall=(1.0, 1.0, 1.0), out="aa", bonus=0.0) -> ArmFigures:
    return ArmFigures(sync, hits, list(stall), out, bonus)


def test_sync_misses_may_not_rise():
    assert SyncMisses().check(arm(), arm(sync=10.0)).status == "pass"
    assert SyncMisses().check(arm(), arm(sync=9.5)).status == "pass"
    out = SyncMisses().check(arm(), arm(sync=10.001))
    assert out.status == "reject" and "10.000 -> 10.001" in out.reason
    assert SyncMisses().check(arm(sync=None), arm()).status == "n/a"


def test_bonus_zero_output_must_not_change():
    assert Bonus0Output().check(arm(), arm()).status == "pass"
    out = Bonus0Output().check(arm(), arm(out="bb"))
    assert out.status == "reject" and "aa != bb" in out.reason
    assert Bonus0Output().check(arm(), arm(out="bb", bonus=0.85)).status == "n/a"


def test_timely_hits_must_not_turn_into_exposed_waits():
    rule = ExposedWaits()
    steady = (1.0, 1.02, 0.99)
    # more hits and a stall clearly up in every pair: hits became exposed waits
    out = rule.check(arm(stall=(1.0, 1.01, 0.99, 1.02)), arm(hits=25.0, stall=(3.0, 3.05, 2.98)))
    assert out.status == "reject" and "hits 20.000 -> 25.000" in out.reason
    # more hits, stall down: the point of a prefetcher
    assert rule.check(arm(stall=(3.0, 3.01)), arm(hits=25.0, stall=(1.0,))).status == "pass"
    # stall up but within the runs' spread: not readable, not a rejection
    noisy = rule.check(arm(stall=(1.0, 3.0, 1.0)), arm(hits=25.0, stall=(2.0, 1.5)))
    assert noisy.status == "pass"
    # stall up with fewer hits: that is sync-misses' business, not this rule's
    assert rule.check(arm(stall=steady), arm(hits=15.0, stall=(3.0, 3.1))).status == "pass"


def runs_of(a: dict, b: dict, pairs: int = 2, out_b: str = "aa") -> list[dict]:
    """Schedule A B A B A with the same phase figures in every run of an arm."""
    def run(arm_: str, figures: dict) -> dict:
        phase = {"tokens": 10, "ms_per_token": 1.0, "quality_kl": 0.0, "top1_agreement": 100.0,
                 **figures}
        return {"arm": arm_, "output_hash": "aa" if arm_ == "A" else out_b,
                "phases": {"prefill": phase, "decode": phase}}
    return [run(x, a if x == "A" else b) for x in ["A", "B"] * pairs + ["A"]]


A = {"sync_misses_per_token": 5.0, "hits_per_token": 10.0, "stall_ms_per_token": 1.0}


def test_the_verdict_names_the_rule_that_rejects_and_where():
    rules = ruleset("seed000")
    good = evaluate(rules, "chat-cold", runs_of(A, {**A, "sync_misses_per_token": 4.0}),
                    {"A": 0.0, "B": 0.0})
    bad = evaluate(rules, "shifted", runs_of(A, {**A, "sync_misses_per_token": 6.0}),
                   {"A": 0.0, "B": 0.0})
    assert len(good) == 2 * len(rules) and {o["status"] for o in good} == {"pass"}
    text = verdict("seed000", good + bad, ["chat-cold", "shifted"])
    assert text.startswith("reject B: rule sync-misses fails on shifted (prefill): "
                           "5.000 -> 6.000") and "(and 1 more)" in text
    assert verdict("seed000", good, ["chat-cold"]) == "no rule of seed000 rejects B on chat-cold"
    changed = evaluate(rules, "chat-warm", runs_of(A, A, out_b="bb"), {"A": 0.0, "B": 0.0})
    assert "rule bonus0-output fails on chat-warm" in verdict("seed000", changed, ["chat-warm"])
    with pytest.raises(ValueError, match="rules 'seed001': allowed seed000"):
        ruleset("seed001")


def test_tuner_ab_runs_each_workload_and_prints_the_rules(tiny_overrides, capsys, refuses):
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in tiny_overrides.items()]
    status = main(["ab", "baseline", "moce_bonus=0.85", "--pairs", "1", "--tokens", "40",
                   "--warmup", "0", "--workloads", "chat-cold,shifted", "--rules", "seed000",
                   "--json", *flags])
    r = json.loads(capsys.readouterr().out)
    assert status == (Exit.REJECTED if r["rejected"] else Exit.OK)
    assert [w["workload"] for w in r["workloads"]] == ["chat-cold", "shifted"]
    assert [run["workload"] for run in r["runs"]] == ["chat-cold"] * 3 + ["shifted"] * 3
    assert {(o["workload"], o["phase"]) for o in r["outcomes"]} == {
        (w, p) for w in ("chat-cold", "shifted") for p in ("prefill", "decode")}
    bonus = [o for o in r["outcomes"] if o["rule"] == "bonus0-output"]
    assert {o["status"] for o in bonus} == {"n/a"}  # B's bonus changes output on purpose
    assert r["verdict"].startswith(("reject B: rule", "no rule of seed000 rejects B"))
    status = main(["ab", "baseline", "2q", "--pairs", "1", "--tokens", "40", "--warmup", "0",
                   "--workloads", "chat-cold", "--rules", "seed000", *flags])
    text = capsys.readouterr().out
    assert status == (Exit.REJECTED if "verdict: reject" in text else Exit.OK)
    assert "rules seed000:" in text and "workload chat-cold:" in text and "verdict:" in text
    refuses(["ab", "baseline", "2q", "--workloads", "nope", *flags],
            "workload 'nope' is neither a built-in")
