"""decode_2q, the older name of cache_policy, still works wherever a knob is given, and the
cache policy's choices are the engine's registry of policies."""

from __future__ import annotations

import pytest

from tuner import settings
from tuner.cli import build_parser
from tuner.commands.args import settings_from_args
from tuner.knobs import ALIASES, BY_NAME
from tuner.presets import PresetError, parse
from tuner.settings import SettingsError
from tuner.vocabulary.policies import POLICIES


def test_cache_policy_offers_every_registered_policy():
    knob = BY_NAME["cache_policy"]
    assert knob.choices == knob.search == tuple(POLICIES)
    assert all(POLICIES[name].summary in knob.help for name in POLICIES)


def test_every_older_name_stands_for_values_its_knob_allows():
    for alias in ALIASES:
        assert alias.old.name not in BY_NAME
        assert {new for _, new in alias.means} <= set(BY_NAME[alias.knob].choices)


def test_an_old_preset_file_gives_2q():
    knobs, _ = parse("[knobs]\ndecode_2q = true\n", "old.toml")
    assert knobs == {"cache_policy": "2q"}
    assert parse("[knobs]\ndecode_2q = 0\n", "old.toml")[0] == {"cache_policy": "lru"}


@pytest.mark.parametrize("text, policy", [("1", "2q"), ("true", "2q"), ("0", "lru")])
def test_the_environment_gives_2q(monkeypatch, text, policy):
    monkeypatch.setenv("STRATA_METAL_DECODE_2Q", text)
    assert settings.load().cache_policy == policy


def test_the_flag_gives_2q_and_a_later_layer_still_wins(monkeypatch):
    args = build_parser(["run"]).parse_args(["run", "--decode-2q", "1"])
    assert settings_from_args(args).cache_policy == "2q"
    monkeypatch.setenv("STRATA_METAL_DECODE_2Q", "1")
    args = build_parser(["run"]).parse_args(["run", "--cache-policy", "lru"])
    assert settings_from_args(args).cache_policy == "lru"  # flags over the environment


def test_changes_take_it_and_output_the_knob():
    s = settings.apply(settings.defaults(), {"STRATA_METAL_DECODE_2Q": True})
    assert s.cache_policy == "2q" and "decode_2q" not in s.model_dump()
    assert settings.non_default(s) == {"cache_policy": "2q"}


def test_the_older_name_and_its_knob_must_agree_when_given_together():
    assert settings.validate({"decode_2q": True, "cache_policy": "2q"}).cache_policy == "2q"
    with pytest.raises(SettingsError) as err:
        settings.validate({"cache_policy": "lru", "decode_2q": True})
    assert err.value.problems == {"decode_2q": "decode_2q (the older name of cache_policy) "
                                               "and cache_policy disagree: 'lru' against "
                                               "'2q'; give one of the two"}
    with pytest.raises(PresetError, match=r"^p.toml:3: decode_2q .* disagree"):
        parse("[knobs]\ncache_policy = '2q'\ndecode_2q = false\n", "p.toml")


@pytest.mark.parametrize("value", ["yes", 2, 1.0, "2q", None])
def test_its_values_are_checked_as_a_switch_and_named_by_it(value):
    with pytest.raises(SettingsError) as err:
        settings.validate({"decode_2q": value})
    assert list(err.value.problems) == ["decode_2q"]
    assert err.value.problems["decode_2q"].startswith("decode_2q (STRATA_METAL_DECODE_2Q) = ")
    assert "expected 0 or 1 (false or true)" in err.value.problems["decode_2q"]
