"""The quality gate: an arm that loses more quality than allowed fails whatever its speed;
`tuner quality` measures perplexity beside exact routing's."""

from __future__ import annotations

import json

import pytest

from tuner.cli import main
from tuner.errors import Exit
from tuner.measure.rules import ArmFigures, QualityGate, quality_gate, ruleset, verdict


def test_the_gate_names_the_limit_an_arm_broke():
    assert quality_gate(0.0, 100.0, 0.01, 99) is None
    assert quality_gate(0.02, 97.5, 0.01, 99) == (
        "KL 0.02 nats/token > max_kl 0.01; top-1 agreement 97.5 % < min_agreement 99 %")
    assert quality_gate(None, None, 0.01, None) == "no KL measured (no decoded token compared)"
    assert quality_gate(5.0, 0.0, None, None) is None  # no limit, nothing checked
    assert ruleset("") == () and ruleset("", None, None) == ()
    assert [r.name for r in ruleset("seed000", 0.01)][-1] == "quality"


def arm(kl: float | None, agreement: float | None) -> ArmFigures:
    return ArmFigures(1.0, 1.0, [0.0], "h", 0.0, kl, agreement)


def test_either_arm_over_a_limit_is_rejected_and_named():
    gate = QualityGate(0.01, None)
    assert gate.phases == ("decode",) and "KL <= 0.01 nats/token" in gate.help
    ok = gate.check(arm(0.0, 100.0), arm(0.005, 99.0))
    assert ok.status == "pass" and ok.reason == ("A: KL 0 nats/token, top-1 100.0 %; "
                                                 "B: KL 0.005 nats/token, top-1 99.0 %")
    b = gate.check(arm(0.0, 100.0), arm(0.02, 90.0))
    assert (b.status, b.arm, b.reason) == ("reject", "B", "B: KL 0.02 nats/token > max_kl 0.01")
    both = gate.check(arm(0.03, 90.0), arm(0.02, 90.0))
    assert (both.status, both.arm) == ("reject", "A and B")
    outcomes = [{"workload": "corpus", "phase": "decode", "rule": "quality", "status": "reject",
                 "arm": "A and B", "reason": both.reason}]
    assert verdict("quality", outcomes, ["corpus"]).startswith(
        "reject A and B: rule quality fails on corpus (decode): A: KL 0.03")
    with pytest.raises(ValueError, match="max_kl = -1: must be >= 0"):
        QualityGate(-1, None)


def tiny_flags(model) -> list[str]:
    return ["--model", str(model), "--expert-cache", "16", "--io-workers", "3",
            "--io-urgent", "1"]


def test_ab_carries_quality_per_arm_and_gates_the_lossy_one(tiny_model, capsys):
    status = main(["ab", "baseline", "drop_cold=0.3", "--pairs", "1", "--tokens", "32",
                   "--warmup", "0", "--max-kl", "0.000001", "--json", *tiny_flags(tiny_model)])
    assert status == Exit.REJECTED  # the gate the user set rejects B: a script can tell
    r = json.loads(capsys.readouterr().out)
    a, b = r["arms"]["A"], r["arms"]["B"]
    assert (a["quality_kl"], a["top1_agreement"]) == (0.0, 100.0)
    assert b["quality_kl"] > 0.000001 and a["identical"] and b["identical"]
    assert r["rules"] == "quality" and r["verdict"].startswith(
        "reject B: rule quality fails on corpus (decode): B: KL")
    assert "Timing: " in r["verdict"]
    assert all(run["quality_kl"] is not None for run in r["runs"])


def test_ab_refuses_a_limit_out_of_range(tiny_model, refuses):
    refuses(["ab", "baseline", "2q", "--min-agreement", "120", *tiny_flags(tiny_model)],
            r"min_agreement = 120.0: must be from 0 to 100")


def test_quality_command_on_a_text(small_model, tmp_path, capsys):
    from tuner.engine.weights.synth import word

    text = tmp_path / "text.txt"
    text.write_text(" ".join(word((7 * i) % 300) for i in range(40)))
    flags = ["--model", str(small_model), "--expert-cache", "8", "--io-workers", "3",
             "--io-urgent", "1"]
    assert main(["quality", "--text", str(text), "--json", "--sweep", "drop_cold=0,0.3",
                 *flags]) == 0
    printed = capsys.readouterr()
    runs = json.loads(printed.out)["runs"]
    # each run says what it measures as it starts, in the knobs' own words
    assert "tuner quality: measuring 1 of 2: drop_cold = 0\n" in printed.err
    assert "tuner quality: measuring 2 of 2: drop_cold = 0.3\n" in printed.err
    assert "{" not in printed.err
    exact, lossy = runs
    assert exact["positions"] == 39 and exact["unknown_words"] == 0
    assert exact["perplexity"] == exact["exact_perplexity"] and exact["quality_kl"] == 0.0
    assert exact["top1_agreement"] == 100.0 and exact["tok_s"] > 0
    assert lossy["quality_kl"] > 0 and lossy["perplexity"] != lossy["exact_perplexity"]
    assert lossy["bytes_per_token"] < exact["bytes_per_token"]
    assert main(["quality", "--text", str(text), *flags]) == 0
    out = capsys.readouterr().out
    assert "39 positions of " in out and "KL 0.0 nats/token, top-1 agreement 100.0 %" in out


def test_quality_command_errors_name_the_problem(small_model, tmp_path, capsys, refuses):
    flags = ["--model", str(small_model)]
    refuses(["quality", "--text", str(tmp_path / "missing.txt"), *flags], "--text .*missing.txt")
    short = tmp_path / "short.txt"
    short.write_text("ka")
    refuses(["quality", "--text", str(short), *flags], "the text is 1 token")
    assert main(["quality", "--sweep", "drop_cold", *flags]) == 2
    assert "expected KNOB=V1,V2" in capsys.readouterr().err
    assert main(["quality", "--sweep", "drop_cold=2", *flags]) == 2
    assert "drop_cold (STRATA_DROP_COLD) = 2.0 is not allowed" in capsys.readouterr().err
