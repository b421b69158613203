"""`tuner ab`: arms from presets or overrides, and a short run on the tiny model."""

from __future__ import annotations

import json

import pytest

from tuner.cli import main
from tuner.measure.ab import arm_settings, repeated
from tuner.presets import PresetError
from tuner.settings import SettingsError, load


@pytest.fixture
def base(tiny_overrides):
    return load(cli=tiny_overrides)


def test_an_arm_is_a_preset_or_overrides_on_top_of_the_base(base, tmp_path):
    two_q = arm_settings("2q", base)
    assert two_q.cache_policy == "2q" and two_q.expert_cache == 16  # the base's are kept
    both = arm_settings("moce_bonus=0.85, cache_policy=2q", base)
    assert (both.moce_bonus, both.cache_policy, both.expert_cache) == (0.85, "2q", 16)
    assert arm_settings("decode_2q=1", base).cache_policy == "2q"  # the older name
    path = tmp_path / "mine.toml"
    path.write_text("[knobs]\nprefetch = 'stale'\n")
    assert arm_settings(str(path), base).prefetch == "stale"


@pytest.mark.parametrize("text, error, message", [
    ("moce_bonus=20", SettingsError,
     r"moce_bonus \(STRATA_METAL_MOCE_BONUS\) = 20.0 is not allowed: expected float in \[0, 10\]"),
    ("bogus=1", SettingsError, "unknown knob 'bogus'"),
    ("cache_policy=2q,x", SettingsError, "'x' is not knob=value; an arm is a preset name"),
    ("nonesuch", PresetError, "no preset of that name; known: .*2q.*; an arm is a preset"),
])
def test_bad_arms_name_what_was_wrong(base, text, error, message):
    with pytest.raises(error, match=message):
        arm_settings(text, base)


def test_repeated_counters_are_checked():
    runs = [{"hit_rate": 60.0, "sync_misses": 5, "bytes_per_token": 10, "output_hash": "h",
             "quality_kl": 0.0, "top1_agreement": 100.0}] * 2
    assert repeated(runs) == {"hit_rate": 60.0, "sync_misses": 5, "bytes_per_token": 10,
                              "output_hash": "h", "quality_kl": 0.0, "top1_agreement": 100.0,
                              "differ": [], "identical": True}
    odd = repeated([runs[0], {**runs[0], "bytes_per_token": 12}])
    assert odd["bytes_per_token"] == [10, 12] and odd["differ"] == ["bytes_per_token"]
    assert not odd["identical"]


def tiny_flags(model) -> list[str]:
    return ["--model", str(model), "--expert-cache", "16", "--io-workers", "3",
            "--io-urgent", "1"]


def test_ab_end_to_end_json(tiny_model, capsys):
    status = main(["ab", "baseline", "2q", "--pairs", "2", "--tokens", "12", "--warmup", "0",
                   "--json", *tiny_flags(tiny_model)])
    assert status == 0
    r = json.loads(capsys.readouterr().out)
    assert [run["arm"] for run in r["runs"]] == ["A", "B", "A", "B", "A"]
    assert r["knob_diff"] == [{"knob": "cache_policy", "env": "STRATA_CACHE_POLICY",
                               "a": "lru", "b": "2q"}]
    assert "cold arena" in r["start_state"] and r["labels"] == {"A": "baseline", "B": "2q"}
    for arm in ("A", "B"):
        assert r["arms"][arm]["identical"]  # the engine is deterministic
    assert r["arms"]["A"]["output_hash"] == r["arms"]["B"]["output_hash"]  # bonus 0
    assert len(r["pair_diffs"]) == 2 and isinstance(r["readable"], bool)
    assert r["verdict"]


def test_ab_a_a_text(tiny_model, capsys):
    status = main(["ab", "baseline", "baseline", "--pairs", "1", "--tokens", "8",
                   *tiny_flags(tiny_model)])
    assert status == 0
    out = capsys.readouterr().out
    assert "(identical settings)" in out and "start state: every run is a fresh session" in out
    assert "identical in every run" in out and "\nverdict: " in out
    assert "1 warm-up run(s) of A not counted" in out


def test_ab_bad_arm_exits_2(tiny_model, capsys):
    assert main(["ab", "baseline", "prefetch=sometimes", *tiny_flags(tiny_model)]) == 2
    assert "prefetch (STRATA_PREFETCH) = 'sometimes' is not allowed: expected one of off" \
        in capsys.readouterr().err
