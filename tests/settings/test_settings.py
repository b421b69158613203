"""The knob table and the settings built from it."""

from __future__ import annotations

import pytest

from tuner import settings
from tuner.knobs import KNOBS, Config, config_dict
from tuner.presets import PresetError, Store, parse
from tuner.settings import SettingsError


def test_every_knob_is_complete():
    for k in KNOBS:
        assert k.env.startswith("STRATA_") and k.help and k.group
        assert k.default is not None
        if k.type in (int, float) and k.name != "model":
            assert k.min is not None and k.max is not None, k.name
            assert k.min <= k.default <= k.max or k.default == k.off, k.name
            assert k.off is None or k.off < k.min, k.name
        if k.choices:
            assert k.default in k.choices
    assert len({k.env for k in KNOBS}) == len(KNOBS)


def test_defaults_validate_and_match_config():
    assert config_dict(settings.to_config(settings.defaults())) == config_dict(Config())


def test_arena_budgets_are_parsed_once_into_whole_numbers(monkeypatch):
    """Text from the environment, a flag or a form, or a list from JSON: a tuple of ints in
    the settings and in the engine's Config; its text again wherever it is plain data."""
    monkeypatch.setenv("STRATA_ARENA_BUDGETS", "8,6,2")
    s = settings.load(cli={"expert_cache": "16"})
    assert s.arena_budgets == (8, 6, 2) == settings.to_config(s).arena_budgets
    assert settings.apply(s, {"arena_budgets": [4, 4, 4, 4]}).arena_budgets == (4, 4, 4, 4)
    assert settings.apply(s, settings.from_texts({"arena_budgets": ""})).arena_budgets == ()
    assert s.model_dump(mode="json")["arena_budgets"] == "8,6,2"
    assert config_dict(settings.to_config(s))["arena_budgets"] == "8,6,2"
    assert settings.non_default(s) == {"expert_cache": 16, "arena_budgets": "8,6,2"}


def test_precedence_preset_env_cli(monkeypatch):
    preset = {"moce_bonus": 0.1, "decode_2q": True, "prefetch_max": 5}
    monkeypatch.setenv("STRATA_METAL_MOCE_BONUS", "0.2")
    monkeypatch.setenv("STRATA_PREFETCH_MAX", "6")
    s = settings.load(preset=preset, cli={"prefetch_max": "7"})
    assert (s.moce_bonus, s.cache_policy, s.prefetch_max) == (0.2, "2q", 7)


@pytest.mark.parametrize("changes, knob, fragment", [
    ({"moce_bonus": 11}, "moce_bonus", "float in [0, 10]"),
    ({"STRATA_METAL_MOCE_BONUS": "x"}, "moce_bonus", "STRATA_METAL_MOCE_BONUS"),
    ({"prefetch": "sometimes"}, "prefetch", "one of off, prev, stale"),
    ({"prefetch_max": 2.5}, "prefetch_max", "int in [0, 512]"),
    ({"decode_2q": "maybe"}, "decode_2q", "0 or 1"),
    ({"no_such_knob": 1}, "no_such_knob", "unknown knob"),
    ({"io_urgent": 8}, "settings", "io_urgent (8) must be less than io_workers (8)"),
    ({"arena_split": "per-layer"}, "arena_split", "one of global, layers"),
    ({"arena_budgets": "4, x"}, "arena_budgets", "comma-separated slot counts"),
    ({"arena_budgets": [4, -1]}, "arena_budgets", "comma-separated slot counts"),
    ({"arena_budgets": 4}, "arena_budgets", "slot counts, not a whole number"),
    ({"arena_budgets": "8,9", "expert_cache": 16}, "settings",
     "arena_budgets sum to 17 slots but expert_cache is 16"),
])
def test_bad_values_name_the_knob_and_what_is_allowed(changes, knob, fragment):
    current = settings.defaults()
    with pytest.raises(SettingsError) as err:
        settings.apply(current, changes)
    assert fragment in err.value.problems[knob]
    assert current == settings.defaults()  # nothing half-applied


def test_every_bad_knob_is_reported_at_once():
    with pytest.raises(SettingsError) as err:
        settings.apply(settings.defaults(), {"moce_bonus": -1, "prefetch": 3, "zzz": 0})
    assert set(err.value.problems) == {"moce_bonus", "prefetch", "zzz"}


def test_bad_env_and_unknown_env(monkeypatch):
    monkeypatch.setenv("STRATA_PREFETCH_MAX", "lots")
    with pytest.raises(SettingsError, match="STRATA_PREFETCH_MAX"):
        settings.load()
    monkeypatch.delenv("STRATA_PREFETCH_MAX")
    monkeypatch.setenv("STRATA_PREFECH", "stale")
    with pytest.raises(SettingsError, match="unknown environment knob 'STRATA_PREFECH'"):
        settings.load()


@pytest.mark.parametrize("text, line, fragment", [
    ("[knobs]\nmoce_bonus = 0.5\nprefetch = 'stale\n", 3, "not valid TOML"),
    ("[preset]\nname = 'x'\n\n[knobs]\nmoce_bonnus = 0.5\n", 5, "unknown knob"),
    ("[knobs]\ndecode_2q = true\nmoce_bonus = 99\n", 3, "float in [0, 10]"),
    ("[preset]\nauthor = 'me'\n", 2, "unknown [preset] key"),
    ("[other]\nx = 1\n", 1, "unknown table"),
])
def test_malformed_preset_names_file_and_line(text, line, fragment):
    with pytest.raises(PresetError) as err:
        parse(text, "p.toml")
    assert err.value.line == line and fragment in str(err.value)
    assert str(err.value).startswith(f"p.toml:{line}: ")


def test_shipped_presets_are_valid():
    store = Store()
    names = store.names()
    assert {"baseline", "seed000-route", "2q", "stale-prefetch"} <= set(names)
    for entry in store.list():
        assert entry["error"] is None, entry


def test_preset_round_trip(tuner_home):
    store = Store()
    s = settings.apply(settings.defaults(), {"moce_bonus": 0.85, "cache_policy": "2q",
                                             "prefetch": "stale"})
    store.save("mine", s, "a test")
    back = store.get("mine")
    assert back.settings() == s
    assert back.knobs == {"moce_bonus": 0.85, "cache_policy": "2q", "prefetch": "stale"}
    assert back.meta["description"] == "a test" and back.meta["engine_version"]
    assert not list(store.user.glob("*.tmp"))


def test_a_preset_keeps_budgets_as_their_text(tuner_home):
    s = settings.apply(settings.defaults(), {"expert_cache": 16, "arena_split": "layers",
                                             "arena_budgets": (10, 6)})
    saved = Store().save("split", s)
    assert 'arena_budgets = "10,6"' in saved.path.read_text()
    back = Store().get("split")
    assert back.knobs["arena_budgets"] == "10,6" and back.settings() == s


@pytest.mark.parametrize("name", ["../x", "a/b", "..", ".hidden", "", "x" * 65, "a..b"])
def test_preset_names_cannot_escape(name):
    with pytest.raises(PresetError):
        Store().save(name, settings.defaults())


def test_corrupt_user_preset_is_listed_not_fatal(tuner_home):
    store = Store()
    store.user.mkdir(parents=True)
    (store.user / "broken.toml").write_text("[knobs]\nmoce_bonus = 'high'\n")
    entry = next(e for e in store.list() if e["name"] == "broken")
    assert "broken.toml:2" in entry["error"]


