"""`tuner realism`: shape figures and policy rankings beside the model's own routing and
the shipped public figures, Kendall's tau, and the verdicts that differ in words."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tuner.cli import main
from tuner.engine.weights import synth
from tuner.traces import realism
from tuner.traces.modes import MODES
from tuner.traces.realism import Routing, disagreements, taus
from tuner.traces.record import record
from tuner.vocabulary import trace_format


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


def test_shipped_public_figures_with_their_sources():
    logs = {p.name: p for p in realism.public_logs()}
    assert list(logs) == ["Mixtral-8x7B decode", "DeepSeek-V2-Lite prefill",
                          "Qwen1.5-MoE decode", "Qwen1.5-MoE prefill"]
    assert all(p.source and p.phase in ("decode", "prefill") for p in logs.values())
    qwen = logs["Qwen1.5-MoE decode"]
    assert "weiran0129/vLLM-MoE-Logger" in qwen.source
    assert qwen.slots == [45, 75, 150] and qwen.hit_rate["static"] == [21.4, 33.3, 59.9]
    assert qwen.shape["prev_temporal_pp"] == 4.0
    assert set(qwen.hit_rate) == set(MODES) - {"lru+prev"}  # not measured on the logs
    assert realism.decode_range(list(logs.values()))["gini"] == (0.119, 0.141)


def test_the_shipped_demo_figures_are_of_this_versions_demo_model():
    model, doc = realism.demo_routing()
    assert doc["model"] == synth.DEFAULT.id
    assert model.kind == "model" and set(model.hit_rate) == set(MODES)
    assert doc["measured_with"].startswith("tuner trace record")


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
    assert names[:2] == ["tiny.npz", "tiny.npz"] and len(names) == 6
    assert out["tau"]["tiny.npz"]["tiny.npz"] == [1.0, 1.0, 1.0]
    assert set(out["tau"]["tiny.npz"]) == {"tiny.npz", "Mixtral-8x7B decode",
                                           "DeepSeek-V2-Lite prefill", "Qwen1.5-MoE decode",
                                           "Qwen1.5-MoE prefill"}
    assert out["disagreements"]["tiny.npz"] == []
    mine = out["columns"][0]
    assert mine["slots"] == [10, 16, 32] and mine["working_sets"] == [0.62, 1.0, 2.0]
    assert set(mine["hit_rate"]) == set(MODES)
    # 15 % of the tiny model's 64 pairs is below one token's 16 routings
    assert out["notes"][0].startswith("warning: tiny.npz at 15 % of the pairs holds 10 slots")
    verdicts = {(v["policy"], v["share_pct"]): v for v in out["public_verdicts"]}
    assert verdicts[("static", 15)]["beats"] == 3 and verdicts[("2q", 25)]["loses"] == 4


def test_realism_text_against_the_shipped_demo_figures(recorded, capsys):
    assert main(["realism", str(recorded)]) == 0
    text = capsys.readouterr().out
    assert "the model's own routing, the demo model" in text
    assert "Kendall's tau-b of the rankings at 15 / 25 / 50 %" in text
    assert "where tiny.npz and the demo model disagree" in text
    assert "pinning the most-routed pairs against LRU: 15 % 3/0/1, 25 % 2/0/2, 50 % 3/0/1" in text
    assert main(["realism", str(recorded.with_name("missing.npz"))]) == 2
    assert "no such file" in capsys.readouterr().err
