"""`tuner realism`: shape figures and policy rankings beside the model's own routing and
the shipped public figures, Kendall's tau, and the verdicts that differ in words."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tuner.cli import main
from tuner.engine.weights import synth
from tuner.traces import realism
from tuner.traces.modes import MODES
from tuner.traces.realism import Routing, disagreements, taus
from tuner.traces.record import record
from tuner.vocabulary import trace_format
from tuner.vocabulary.trace_format import Trace


def column(name: str, rates: dict[str, list[float]], kind: str = "trace") -> Routing:
    return Routing(name, kind, "hand", 100, 4, 2, 8, {}, [5, 8, 16], rates,
                   working_sets=[0.62, 1.0, 2.0])


RATES = {"lru": [30.0, 40.0, 60.0], "2q": [25.0, 38.0, 59.0], "opt": [50.0, 60.0, 80.0],
         "static": [34.0, 44.0, 61.0], "static_half": [28.0, 39.0, 58.0]}


def test_tau_compares_the_rankings_size_by_size():
    mine = column("mine.npz", RATES)
    assert taus(mine, mine) == [1.0, 1.0, 1.0]
    flipped = column("flipped", {p: [-v for v in r] for p, r in RATES.items()})
    assert taus(mine, flipped) == [-1.0, -1.0, -1.0]
    # over the policies both have: a column without static_half is ranked on four
    fewer = column("fewer", {p: r for p, r in RATES.items() if p != "static_half"})
    assert taus(mine, fewer) == [1.0, 1.0, 1.0]
    flat = column("flat", {p: [10.0, 10.0, 10.0] for p in RATES})
    assert taus(mine, flat) == [None, None, None]


def test_the_verdicts_that_differ_are_spelled_out():
    mine = column("your routing", RATES)
    # the model: LRU beats pinning at 15 %, agrees at 25 %, a tie at 50 %
    model = column("the demo model", {**RATES, "static": [27.0, 44.2, 60.3]}, "model")
    found = disagreements(mine, model)
    assert [(d["share_pct"], d["policy"], d["against"], d["opposite"]) for d in found] == [
        (15, "static", "lru", True), (50, "static", "lru", False)]
    assert found[0]["text"] == (
        "at 15 % of the pairs (5 slots, 0.62 working sets): on your routing pinning the "
        "most-routed pairs beats LRU by 4.0 pp; the demo model says the opposite (LRU beats "
        "pinning the most-routed pairs by 3.0 pp)")
    assert found[1]["text"].endswith(
        "on your routing pinning the most-routed pairs beats LRU by 1.0 pp; the demo model "
        "says pinning the most-routed pairs and LRU are within 0.5 pp (+0.3)")


def test_tau_leaves_out_what_one_side_did_not_measure():
    mine = column("mine.npz", RATES)
    half = column("half", {**RATES, "2q": [None, 38.0, 59.0]})
    flipped = column("flipped", {**RATES, "2q": [99.0, 38.0, 59.0]})
    assert taus(mine, half) == [1.0, 1.0, 1.0]  # four policies at 15 %, five above
    assert taus(flipped, half) == [1.0, 1.0, 1.0] and taus(flipped, mine)[0] < 1.0


def test_shipped_public_figures_with_their_sources_and_definitions():
    doc = json.loads((Path(realism.__file__).parent / "data" / realism.PUBLIC_FILE).read_text())
    assert doc["definitions"]["modes"] == {name: m.help for name, m in MODES.items()}
    logs = {p.name: p for p in realism.public_logs()}
    assert list(logs) == ["Mixtral-8x7B decode", "DeepSeek-V2-Lite prefill",
                          "Qwen1.5-MoE decode", "Qwen1.5-MoE prefill", "OLMoE-1B-7B layer 0"]
    assert all(p.source and p.phase for p in logs.values())
    assert all(log["imported_with"].startswith("tuner trace import") and log["measured_with"]
               for log in doc["logs"])
    qwen = logs["Qwen1.5-MoE decode"]
    assert "weiran0129/vLLM-MoE-Logger" in qwen.source
    assert qwen.slots == [45, 75, 150] and qwen.hit_rate["static"] == [21.43, 33.31, 59.91]
    # pinned from the first half, measured on the whole log (as the mode is defined)
    assert qwen.hit_rate["static_half"] == [20.98, 32.79, 59.43]
    assert qwen.shape["prev_temporal_pp"] == 4.2 and set(qwen.hit_rate) == set(MODES)
    olmoe = logs["OLMoE-1B-7B layer 0"]  # one layer: no read-ahead, no depth
    assert set(olmoe.hit_rate) == set(MODES) - {"lru+prev", "lru+oracle"}
    assert olmoe.depth_rho == [None, None, None] and olmoe.tokens == 4471
    mixtral = logs["Mixtral-8x7B decode"]  # its log was not at hand to measure again
    assert mixtral.hit_rate["lru+prev"] == [None, None, None]
    assert realism.decode_range(list(logs.values()))["gini"] == (0.119, 0.141)


def test_the_shipped_demo_figures_are_of_this_versions_demo_model():
    model, doc = realism.demo_routing()
    assert doc["model"] == synth.DEFAULT.id
    assert model.kind == "model" and set(model.hit_rate) == set(MODES)
    assert "trace record" in doc["measured_with"] and "--write-model" in doc["measured_with"]


@pytest.fixture(scope="module")
def recorded(tiny_model, tmp_path_factory):
    from tuner.knobs import Config

    cfg = Config(model=str(tiny_model), expert_cache=16, io_workers=3, io_urgent=1)
    trace, _ = record(replace(cfg, context=64), 160)
    path = tmp_path_factory.mktemp("realism") / "tiny.npz"
    trace_format.save(trace, path)
    return path


def test_realism_of_a_trace_beside_itself_and_the_public_logs(recorded, capsys):
    assert main(["realism", str(recorded), "--model-trace", str(recorded), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    names = [c["name"] for c in out["columns"]]
    assert names[:2] == ["tiny.npz", "tiny.npz"] and len(names) == 7
    assert out["tau"]["tiny.npz"]["tiny.npz"] == [1.0, 1.0, 1.0]
    assert set(out["tau"]["tiny.npz"]) == {"tiny.npz", "Mixtral-8x7B decode",
                                           "DeepSeek-V2-Lite prefill", "Qwen1.5-MoE decode",
                                           "Qwen1.5-MoE prefill", "OLMoE-1B-7B layer 0"}
    assert out["disagreements"]["tiny.npz"] == []
    # the real logs' own disagreement: DeepSeek-V2-Lite and Qwen1.5 rank alike at 0.6 only
    assert len(out["public_tau"]["pairs"]) == 6  # four multi-layer logs, OLMoE's has one
    assert out["public_tau"]["lowest"] == [
        {"tau": 0.6, "logs": ["DeepSeek-V2-Lite prefill", "Qwen1.5-MoE decode"]}] * 3
    mine = out["columns"][0]
    assert mine["slots"] == [10, 16, 32] and mine["working_sets"] == [0.62, 1.0, 2.0]
    assert set(mine["hit_rate"]) == set(MODES)
    # 15 % of the tiny model's 64 pairs is below one token's 16 routings
    assert out["notes"][0].startswith("warning: tiny.npz at 15 % of the pairs holds 10 slots")
    verdicts = {(v["policy"], v["share_pct"]): v for v in out["public_verdicts"]}
    assert verdicts[("static", 15)]["beats"] == 4 and verdicts[("2q", 25)]["loses"] == 4
    # read ahead: four multi-layer logs measured it (Mixtral's was not), OLMoE has one layer
    assert sum(verdicts[("lru+oracle", 15)][k] for k in ("beats", "ties", "loses")) == 4


def test_realism_text_against_the_shipped_demo_figures(recorded, capsys):
    assert main(["realism", str(recorded)]) == 0
    text = capsys.readouterr().out
    assert "the model's own routing, the demo model" in text
    assert "Kendall's tau-b of the rankings at 15 / 25 / 50 %" in text
    assert "where tiny.npz and the demo model disagree" in text
    assert ("the public multi-layer logs against each other, lowest: 0.60 / 0.60 / 0.60 "
            "(DeepSeek-V2-Lite prefill and Qwen1.5-MoE decode)") in text
    assert "pinning the most-routed pairs against LRU: 15 % 4/0/1, 25 % 3/0/2, 50 % 4/0/1" in text
    assert main(["realism", str(recorded.with_name("missing.npz"))]) == 2
    assert "no such file" in capsys.readouterr().err


def test_one_layer_reads_nothing_ahead_and_a_short_trace_is_warned_of(capsys):
    g = np.random.default_rng(0)
    routings = [g.choice(16, 2, replace=False) for _ in range(200)]
    one = Trace(np.array(routings, np.int32)[:, None], {"num_experts": 16})
    mine = realism.measure(one, "one.npz")
    assert set(mine.hit_rate) == set(MODES) - {"lru+prev", "lru+oracle"}
    assert mine.depth_rho == [None, None, None]
    model, _ = realism.demo_routing()
    found = realism.disagreements(mine, model)
    assert {d["policy"] for d in found} <= {"static", "static_half", "2q"}
    notes = realism.report([mine], model, realism.public_logs())["notes"]
    assert notes == [
        f"warning: one.npz has 200 tokens; below {realism.SETTLED_TOKENS:,}, prefixes of the "
        "demo model's own recording give verdicts its whole recording does not (pinning from "
        "the first half most of all: its routing drifts), so these may not hold over a longer "
        "run: record or import more tokens",
        "one.npz has one layer: nothing is read ahead of layer 0, so the read-ahead modes "
        "(lru+prev, lru+oracle) are not measured and their verdicts not given"]


def test_depth_follows_the_per_layer_hit_rates():
    assert realism.depth_rho(np.array([5, 4, 3]), np.array([10, 10, 10])) == -1.0
    assert realism.depth_rho(np.array([1, 3, 2]), np.array([10, 10, 10])) == 0.5
    assert realism.depth_rho(np.array([3, 3]), np.array([10, 10])) is None
    assert realism.depth_rho(np.array([3]), np.array([10])) is None


def test_the_shipped_figures_are_written_from_a_measured_trace(recorded, tmp_path,
                                                               monkeypatch, capsys):
    data = Path(realism.__file__).parent / "data"
    for name in (realism.DEMO_FILE, realism.PUBLIC_FILE):
        (tmp_path / name).write_text((data / name).read_text())
    monkeypatch.setattr(realism, "_path", lambda name: tmp_path / name)
    assert main(["realism", str(recorded), "--write-public", "Qwen1.5-MoE decode"]) == 0
    assert capsys.readouterr().out == f"wrote {tmp_path / realism.PUBLIC_FILE}\n"
    qwen = {p.name: p for p in realism.public_logs()}["Qwen1.5-MoE decode"]
    assert qwen.tokens == 160 and qwen.layers == 4 and qwen.source.startswith("Qwen1.5")
    assert main(["realism", str(recorded), "--write-public", "Grok"]) == 2
    assert "no public log named 'Grok'; the shipped ones: Mixtral" in capsys.readouterr().err
    # a recording of another model is not the demo model's
    assert main(["realism", str(recorded), "--write-model"]) == 2
    assert f"the shipped figures are the demo model's, {synth.DEFAULT.id!r}" in \
        capsys.readouterr().err
    trace = trace_format.load(recorded)
    trace.meta["model"] = synth.DEFAULT.id
    trace_format.save(trace, tmp_path / "demo.npz")
    assert main(["realism", str(tmp_path / "demo.npz"), "--write-model"]) == 0
    model, doc = realism.demo_routing()
    assert doc["model"] == synth.DEFAULT.id and model.tokens == 160
    assert doc["measured_with"].startswith("tuner ") and "--write-model" in doc["measured_with"]
