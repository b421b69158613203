"""The quality gate: an arm that loses more quality than allowed fails whatever its speed;
`tuner quality` measures perplexity beside exact routing's."""

from __future__ import annotations

import json

import pytest

from tuner.cli import main
from tuner.measure.gate import apply_rules, quality_gate, quality_rules


def test_the_gate_names_the_limit_an_arm_broke():
    assert quality_gate({"quality_kl": 0.0, "top1_agreement": 100.0}, 0.01, 99) == (
        True, "within the quality gate")
    passed, why = quality_gate({"quality_kl": 0.02, "top1_agreement": 97.5}, 0.01, 99)
    assert not passed
    assert why == "KL 0.02 nats/token > max_kl 0.01; top-1 agreement 97.5 % < min_agreement 99 %"
    assert quality_gate({"quality_kl": None, "top1_agreement": None}, 0.01)[1] == \
        "no KL measured (quality_every = 0)"
    assert quality_gate({"quality_kl": 5.0}, None, None)[0]  # no limit, nothing checked
    assert quality_rules(None, None) == []


def test_a_rejected_arm_leads_the_verdict_whatever_its_speed():
    result = {"verdict": "B faster than A by 3.000 ms/token (-30.0 %); 2 of 2 pairs agree",
              "arms": {"A": {"quality_kl": 0.0, "top1_agreement": 100.0},
                       "B": {"quality_kl": 0.02, "top1_agreement": 90.0}}}
    apply_rules(result, quality_rules(0.01, None))
    assert not result["passed"]
    assert result["arms"]["A"]["rejected"] == []
    assert result["arms"]["B"]["rejected"] == ["KL 0.02 nats/token > max_kl 0.01"]
    assert result["verdict"].startswith("B rejected, whatever its speed: KL 0.02")
    assert result["verdict"].endswith("Timing: B faster than A by 3.000 ms/token (-30.0 %); "
                                      "2 of 2 pairs agree")


def tiny_flags(model) -> list[str]:
    return ["--model", str(model), "--expert-cache", "16", "--io-workers", "3",
            "--io-urgent", "1"]


def test_ab_carries_quality_per_arm_and_gates_the_lossy_one(tiny_model, capsys):
    status = main(["ab", "baseline", "drop_cold=0.3", "--pairs", "1", "--tokens", "16",
                   "--warmup", "0", "--max-kl", "0.000001", "--json", *tiny_flags(tiny_model)])
    assert status == 0
    r = json.loads(capsys.readouterr().out)
    a, b = r["arms"]["A"], r["arms"]["B"]
    assert (a["quality_kl"], a["top1_agreement"], a["rejected"]) == (0.0, 100.0, [])
    assert b["quality_kl"] > 0.000001 and b["rejected"] and a["identical"] and b["identical"]
    assert not r["passed"] and r["verdict"].startswith("B rejected, whatever its speed: KL")
    assert all(run["quality_kl"] is not None for run in r["runs"])


def test_ab_refuses_a_limit_out_of_range(tiny_model, capsys):
    with pytest.raises(SystemExit, match=r"min_agreement = 120.0: must be from 0 to 100"):
        main(["ab", "baseline", "2q", "--min-agreement", "120", *tiny_flags(tiny_model)])


def test_quality_command_on_a_text(small_model, tmp_path, capsys):
    from tuner.engine.synth import word

    text = tmp_path / "text.txt"
    text.write_text(" ".join(word((7 * i) % 300) for i in range(40)))
    flags = ["--model", str(small_model), "--expert-cache", "8", "--io-workers", "3",
             "--io-urgent", "1"]
    assert main(["quality", "--text", str(text), "--json", "--sweep", "drop_cold=0,0.3",
                 *flags]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    exact, lossy = runs
    assert exact["positions"] == 39 and exact["unknown_words"] == 0
    assert exact["perplexity"] == exact["exact_perplexity"] and exact["quality_kl"] == 0.0
    assert exact["top1_agreement"] == 100.0 and exact["tok_s"] > 0
    assert lossy["quality_kl"] > 0 and lossy["perplexity"] != lossy["exact_perplexity"]
    assert lossy["bytes_per_token"] < exact["bytes_per_token"]
    assert main(["quality", "--text", str(text), *flags]) == 0
    out = capsys.readouterr().out
    assert "39 positions of " in out and "KL 0.0 nats/token, top-1 agreement 100.0 %" in out


def test_quality_command_errors_name_the_problem(small_model, tmp_path, capsys):
    flags = ["--model", str(small_model)]
    with pytest.raises(SystemExit, match="--text .*missing.txt"):
        main(["quality", "--text", str(tmp_path / "missing.txt"), *flags])
    short = tmp_path / "short.txt"
    short.write_text("ka")
    with pytest.raises(SystemExit, match="the text is 1 token"):
        main(["quality", "--text", str(short), *flags])
    assert main(["quality", "--sweep", "drop_cold", *flags]) == 2
    assert "expected KNOB=V1,V2" in capsys.readouterr().err
    assert main(["quality", "--sweep", "drop_cold=2", *flags]) == 2
    assert "drop_cold (STRATA_DROP_COLD) = 2.0 is not allowed" in capsys.readouterr().err
