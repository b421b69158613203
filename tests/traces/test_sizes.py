"""Arena sizes as slots, shares of the pairs or working sets (one token's layers x top-k),
in replay, budgets, trace stats and the live curve, with a warning below one working set."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tuner.cli import main
from tuner.traces.curve import curve_sizes, hit_curve
from tuner.traces.sizes import below_working_set, parse_size, parse_sizes, working_set
from tuner.vocabulary import trace_format
from tuner.vocabulary.trace_format import Trace, TraceError


@pytest.fixture
def trace() -> Trace:
    """4 layers, top-2 of 10 experts: one token's working set is 8 slots, the pairs 40."""
    g = np.random.default_rng(1)
    ids = np.stack([[g.choice(10, 2, replace=False) for _ in range(4)] for _ in range(50)])
    return Trace(ids.astype(np.int32), {"num_experts": 10, "model": "hand"})


@pytest.fixture
def saved(trace, tmp_path):
    path = tmp_path / "t.npz"
    trace_format.save(trace, path)
    return path


@pytest.mark.parametrize("text, slots", [("12", 12), ("25%", 10), ("12.5%", 5), ("1ws", 8),
                                         ("1.5ws", 12), (" 2 ws ", 16), ("0.1ws", 1)])
def test_sizes_as_slots_shares_or_working_sets(trace, text, slots):
    assert working_set(trace) == 8
    assert parse_size(text, trace) == slots


@pytest.mark.parametrize("text, why", [("1.5", "a slot count is a whole number"),
                                       ("2x", r"allowed a slot count \(205\), a share"),
                                       ("-3", "allowed"), ("0", "is 0 slots; the arena needs"),
                                       ("0.01ws", "is 0 slots")])
def test_bad_sizes_say_what_is_allowed(trace, text, why):
    with pytest.raises(TraceError, match=why):
        parse_size(text, trace, "--slots")
    with pytest.raises(TraceError, match="give one or more"):
        parse_sizes(" , ", trace)


def test_below_one_working_set_comes_with_a_warning(trace):
    assert below_working_set(8, trace) is None
    assert below_working_set(7, trace).startswith("7 slots are below one token's working set "
                                                  "(8 = 4 layers x top-2)")


def json_of(capsys, *argv) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_replay_takes_working_sets_and_warns_below_one(saved, capsys):
    out = json_of(capsys, "replay", str(saved), "--slots", "0.5ws")
    assert out["slots"] == 4 and out["working_set"] == 8 and out["working_sets"] == 0.5
    assert out["notes"][0].startswith("warning: 4 slots are below one token's working set")
    assert json_of(capsys, "replay", str(saved), "--slots", "25%")["notes"] == []
    assert main(["replay", str(saved), "--slots", "0.5ws"]) == 0
    text = capsys.readouterr().out
    assert "arena 4 slots (0.5 working sets of 8)" in text
    assert "\nwarning: 4 slots are below one token's working set" in text
    sweep = json_of(capsys, "replay", str(saved), "--sizes", "0.5ws,1ws,50%")
    assert sweep["sizes"] == [4, 8, 20] and sweep["working_sets"] == [0.5, 1.0, 2.5]
    assert "4 slots are below" in sweep["notes"][0]
    assert main(["replay", str(saved), "--slots", "lots"]) == 2
    assert "--slots 'lots': allowed a slot count" in capsys.readouterr().err


def test_budgets_and_stats_take_working_sets(saved, capsys):
    plan = json_of(capsys, "budgets", str(saved), "--slots", "0.75ws")
    assert plan["slots"] == 6 and plan["working_sets"] == 0.75
    assert plan["notes"][0].startswith("warning: 6 slots are below one token's working set")
    assert "get fewer slots than one routing (top-2)" in plan["notes"][1]
    assert json_of(capsys, "budgets", str(saved), "--slots", "2ws")["notes"] == []
    stats = json_of(capsys, "trace", "stats", str(saved), "--slots", "1ws,50%")
    assert stats["traces"][0]["arena_slots"] == [8, 20]


def test_the_live_curve_shows_working_sets_and_warns_below_one(trace):
    assert curve_sizes(20, 40, 8) == [5, 8, 10, 15, 20, 30, 40]  # one working set among them
    curve = hit_curve(trace.experts, 25, 10, 6, {})
    assert 8 in curve["sizes"] and curve["working_set"] == 8
    assert curve["working_sets"][curve["sizes"].index(8)] == 1.0
    assert curve["notes"][0].startswith("warning: 6 slots are below one token's working set")
    assert hit_curve(trace.experts, 25, 10, 8, {})["notes"] == []


@pytest.mark.parametrize("command", [["replay"], ["budgets"], ["trace", "stats"], ["realism"]])
def test_the_commands_that_take_sizes_print_their_help(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0 and "usage: tuner" in capsys.readouterr().out
