"""`tuner tune` on the tiny model: trials as live changes of one session, the Pareto front,
the best trial saved as a preset and A/B-tested against the baseline, and the same study
run on two Ray workers."""

from __future__ import annotations

import json

import pytest

from tuner.cli import main
from tuner.presets import Store


def tiny_flags(model) -> list[str]:
    return ["--model", str(model), "--expert-cache", "16", "--io-workers", "3",
            "--io-urgent", "1"]


def tune(capsys, *args) -> tuple[int, dict | None, str]:
    status = main(["tune", "--tokens", "8", "--warmup", "4", *args])
    out = capsys.readouterr()
    return status, (json.loads(out.out) if "--json" in args else None), out.out + out.err


def test_tune_saves_the_best_trial_and_ab_tests_it(tiny_model, tuner_home, capsys):
    status, r, _ = tune(capsys, "--trials", "5", "--save-best", "fast", "--ab-pairs", "1",
                        "--ab-tokens", "8", "--json", *tiny_flags(tiny_model))
    assert status == 0 and r["complete"] and len(r["trials"]) == 5
    first = r["trials"][0]  # the baseline's own values run first
    assert first["params"] == {"prefetch": "off", "prefetch_max": 2, "prefetch_touch": False,
                               "cache_policy": "lru", "arena_split": "global", "prompt_hot": True,
                               "io_workers": 3, "io_urgent": 1}
    assert r["front"] and all(t["state"] == "complete" for t in r["front"])
    for t in r["trials"]:
        assert t["worker"] and t["baseline_index"] is not None
        assert t["state"] == "complete" or t["rejected"]
    saved = r["saved"]
    assert saved["trial"] == min(r["front"], key=lambda t: (t["score_pct"],
                                                            t["bytes_per_token"]))["number"]
    preset = Store().get("fast")
    assert "model" not in preset.knobs and preset.knobs["expert_cache"] == 16
    assert saved["ab"]["verdict"] and len(saved["ab"]["runs"]) == 3
    assert (tuner_home / "tune.db").is_file()


def test_a_study_is_resumed_and_saved_from_later(tiny_model, capsys):
    flags = ["--study", "again", *tiny_flags(tiny_model)]
    assert tune(capsys, "--trials", "2", *flags)[0] == 0
    status, r, text = tune(capsys, "--trials", "1", "--json", *flags)
    assert status == 0 and len(r["trials"]) == 3
    status, _, text = tune(capsys, "--trials", "1", "--objective", "stall", *flags)
    assert status == 2 and "study 'again'" in text and "other objective" in text
    status, r, text = tune(capsys, "--trials", "0", "--study", "again", "--save-best", "one",
                           "--trial", "0", "--ab-pairs", "0", "--json")
    assert status == 0 and r["saved"]["trial"] == 0 and "saved trial 0" in text
    status, _, text = tune(capsys, "--trials", "0", "--study", "again", "--save-best", "one",
                           "--ab-pairs", "0")
    assert status == 2 and "a user preset of that name exists" in text
    status, _, text = tune(capsys, "--trials", "0", "--study", "again", "--save-best", "one",
                           "--overwrite", "--ab-pairs", "0")
    assert status == 0 and "saved trial" in text
    status, _, text = tune(capsys, "--trials", "0", "--study", "nope", "--save-best", "x")
    assert status == 2 and "no tune study 'nope'" in text and "again" in text


def test_a_quality_gate_brings_the_lossy_knobs_in_and_judges_them(tiny_model, capsys):
    status, r, _ = tune(capsys, "--trials", "4", "--study", "gated", "--tokens", "24",
                        "--warmup", "16", "--max-kl", "0", "--space", "drop_cold=0.3:0.6",
                        "--fix", "prefetch=off,decode_2q=0,moce_bonus=0", "--json",
                        *tiny_flags(tiny_model))
    assert status == 0 and r["spec"]["gate"] == {"max_kl": 0.0, "min_agreement": None}
    assert "drop_cold" in r["spec"]["space"] and "moce_bonus" in r["spec"]["space"]
    lossy = [t for t in r["trials"] if t["params"]["drop_cold"] > 0]
    assert lossy and all(t["rejected"].startswith("quality gate: KL ") and
                         t["state"] == "fail" for t in lossy if t["rejected"])
    assert any(t["rejected"] for t in lossy)  # a dropped expert moved the output


def test_the_front_is_printed(tiny_model, capsys):
    status, _, text = tune(capsys, "--trials", "3", "--study", "print",
                           "--space", "prefetch=off|stale", *tiny_flags(tiny_model))
    assert status == 0
    assert "Pareto front (ms per token against the paired baseline" in text
    assert "3 trials" in text


def test_bad_flags_name_what_is_allowed(tiny_model, capsys, refuses):
    status, _, text = tune(capsys, "--trials", "2", "--space", "prefetch_max=9:2",
                           *tiny_flags(tiny_model))
    assert status == 2 and "low 9 must be below high 2" in text
    refuses(["tune", "--trials", "0"], "--trials 0 runs nothing")
    refuses(["tune", "--min-agreement", "101"], r"min_agreement = 101.0: must be from 0 to 100")


@pytest.mark.slow  # Ray's start
def test_the_study_runs_on_two_ray_workers(tiny_model, capsys):
    status, r, _ = tune(capsys, "--trials", "6", "--ray", "--workers", "2", "--study", "ray",
                        "--json", *tiny_flags(tiny_model))
    assert status == 0 and len(r["trials"]) == 6
    workers = {t["worker"] for t in r["trials"]}
    assert len(workers) == 2  # one study, trials from both workers
    for w in workers:  # each worker paired its trials with its own baselines only
        mine = [t for t in r["trials"] if t["worker"] == w]
        assert mine[0]["baseline_index"] == 0


def test_a_second_tune_of_other_tokens_gets_a_study_of_its_own(tiny_model, capsys):
    flags = ["--trials", "1", *tiny_flags(tiny_model)]
    status, first, _ = tune(capsys, "--json", *flags)
    assert status == 0 and first["trials"][0]["baseline_values"]  # trial 0, and says so
    status, other, _ = tune(capsys, "--json", "--tokens", "12", *flags)
    assert status == 0 and other["study"] != first["study"] and len(other["trials"]) == 1
    status, again, _ = tune(capsys, "--json", *flags)  # the same tune: resumed
    assert again["study"] == first["study"] and len(again["trials"]) == 2
    assert not again["trials"][1]["baseline_values"]
    status, _, text = tune(capsys, "--tokens", "12", "--study", first["study"], *flags)
    line = text.strip().splitlines()[-1]
    assert status == 2 and "{" not in line
    assert line.startswith(f"tuner tune: study {first['study']!r} in ")
    assert "was run with other span (tokens=8, warmup=4; now tokens=12, warmup=4)" in line
    status, saved, _ = tune(capsys, "--trials", "0", "--save-best", "last", "--ab-pairs", "0",
                            "--json")  # no --study: the study run last
    assert status == 0 and saved["study"] == first["study"]
