"""`tuner budgets` and `tuner replay --budgets` through the command line: quotas that sum
to the arena, replay that agrees with the plan, presets that run them, one clear error for
each bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tuner.cli import main
from tuner.presets import Store
from tuner.vocabulary import trace_format
from tuner.vocabulary.trace_format import Trace


@pytest.fixture
def recorded(tiny_model, tmp_path, capsys):
    path = tmp_path / "tiny.npz"
    assert main(["trace", "record", "--tokens", "60", "-o", str(path), "--model",
                 str(tiny_model), "--expert-cache", "16", "--io-workers", "3",
                 "--io-urgent", "1"]) == 0
    capsys.readouterr()
    return path


def run_json(capsys, *argv) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def error(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1  # one line
    return err


@pytest.mark.parametrize("weights", ["hits", "stall"])
def test_budgets_then_replay_with_them(recorded, tmp_path, capsys, weights):
    out_file = tmp_path / "b.json"
    plan = run_json(capsys, "budgets", str(recorded), "--slots", "12", "--weights", weights,
                    "-o", str(out_file))
    assert json.loads(out_file.read_text()) == plan
    assert sum(plan["quotas"]) == 12 and len(plan["quotas"]) == 4
    checked = plan["replay"]
    if weights == "hits":
        assert checked["budgets"]["hits"] >= checked["even"]["hits"]
        assert checked["budgets"]["hits"] == sum(r["hits"] for r in plan["layers"])
    else:
        assert checked["budgets"]["stall_ms"] <= checked["even"]["stall_ms"]
    got = run_json(capsys, "replay", str(recorded), "--budgets", str(out_file))
    assert got["slots"] == 12 and got["split"] == "layers"  # the arena the file was made for
    assert [r["quota"] for r in got["layers"]] == plan["quotas"]
    assert got["totals"]["hits"] == checked["budgets"]["hits"]
    even = run_json(capsys, "replay", str(recorded), "--slots", "12", "--budgets", "even")
    assert even["totals"]["hits"] == checked["even"]["hits"]
    assert main(["budgets", str(recorded), "--slots", "12"]) == 0
    text = capsys.readouterr().out
    assert "one shared LRU arena" in text and "these budgets" in text


def test_saved_budgets_are_a_preset_the_engine_runs(recorded, tiny_model, capsys):
    plan = run_json(capsys, "budgets", str(recorded), "--save", "tiny-budgets")
    assert sum(plan["quotas"]) == 16  # the recorded arena
    preset = Store().get("tiny-budgets")
    assert preset.knobs == {"expert_cache": 16, "arena_split": "layers",
                            "arena_budgets": ",".join(map(str, plan["quotas"]))}
    # token by token, as the trace was recorded: a batched prompt looks each expert up once
    live = run_json(capsys, "run", "--preset", "tiny-budgets", "--tokens", "60", "--model",
                    str(tiny_model), "--io-workers", "3", "--io-urgent", "1", "--prefill", "0")
    assert [row["quota"] for row in live["layers"]] == plan["quotas"]
    assert live["totals"]["hits"] == plan["replay"]["budgets"]["hits"]  # the same routings


def test_bad_inputs_give_one_clear_error(recorded, tmp_path, capsys):
    plan = run_json(capsys, "budgets", str(recorded), "--slots", "12")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**plan, "quotas": [3, 3, 3, 4]}))
    assert "the quotas sum to 13 slots but the arena has 12" in error(
        capsys, "replay", str(recorded), "--slots", "12", "--budgets", str(bad))
    bad.write_text(json.dumps({**plan, "quotas": [2, 2, 2, 2, 2, 2]}))
    assert "6 quotas for a model of 4 layers" in error(
        capsys, "replay", str(recorded), "--slots", "12", "--budgets", str(bad))
    bad.write_text("{not json")
    assert "not a budgets file" in error(capsys, "replay", str(recorded), "--budgets",
                                         str(bad))
    bad.write_text(json.dumps({"quotas": "3,3,3,3"}))
    assert "'quotas' is a list of slot counts" in error(
        capsys, "replay", str(recorded), "--budgets", str(bad))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(plan))
    other = tmp_path / "other.npz"
    trace = trace_format.load(recorded)
    trace_format.save(Trace(trace.experts, {**trace.meta, "model": "another-4x16"}), other)
    assert "computed for model 'strata-tiny-4x16-v2' (16 experts per layer); this trace is of " \
           "'another-4x16'" in error(capsys, "replay", str(other), "--budgets", str(good))
    assert "--budgets fix the arena size" in error(
        capsys, "replay", str(recorded), "--sweep", "--budgets", str(good))
    assert "--slots 65: allowed 1..64" in error(capsys, "budgets", str(recorded),
                                                "--slots", "65")


def test_an_imported_trace(tmp_path, capsys):
    """A route log brought in by an importer: no stall to weigh, and at every arena size
    the computed quotas hit at least as often as an even split."""
    rng = np.random.default_rng(7)
    src = tmp_path / "routes.jsonl"
    popular = rng.permutation(12)[:5]
    rows = []
    for t in range(150):
        for layer in range(3):
            pool = popular if layer == 0 else np.arange(12)  # layer 0 reuses few experts
            ids = rng.choice(pool, size=2, replace=False).tolist()
            rows.append(json.dumps({"layer": layer, "token_idx": t, "experts": ids}))
    src.write_text("\n".join(rows) + "\n")
    imported = tmp_path / "imported.npz"
    assert main(["trace", "import", "jsonl", str(src), "-o", str(imported), "--num-experts",
                 "12", "--model", "mine"]) == 0
    capsys.readouterr()
    assert "no per-layer stall" in error(capsys, "budgets", str(imported), "--slots", "4",
                                         "--weights", "stall")
    assert "does not say its arena size; give --slots" in error(capsys, "budgets",
                                                                str(imported))
    for slots in (4, 9, 18):  # 12.5, 25 and 50 % of the 36 pairs
        plan = run_json(capsys, "budgets", str(imported), "--slots", str(slots))
        assert plan["replay"]["budgets"]["hits"] >= plan["replay"]["even"]["hits"]
    assert plan["quotas"][0] == 5  # the layer that routes 5 experts gets those 5 slots
