"""The search space comes from the knob table; --space narrows it, --fix pins, and a bad
entry names the knob and what it allows."""

from __future__ import annotations

import pytest

from tuner.knobs import KNOBS
from tuner.settings import SettingsError
from tuner.tune.space import build_space, knob_values


def test_the_default_space_is_the_knob_tables_search_entries():
    space = build_space()
    assert {d.name for d in space.dimensions} == {k.name for k in KNOBS
                                                  if k.search and not k.lossy}
    gated = {d.name for d in build_space(lossy=True).dimensions}
    assert gated - {d.name for d in space.dimensions} == {"moce_bonus", "drop_cold"}
    for k in KNOBS:
        if k.search and k.type in (int, float):
            assert k.min <= k.search[0] < k.search[1] <= k.max, k.name
        elif k.search:
            assert set(k.search) <= set(k.choices or (False, True)), k.name


def test_a_lossy_knob_is_tried_off_or_in_its_range():
    import optuna

    dims = {d.name: d for d in build_space(lossy=True).dimensions}
    drop = dims["drop_cold"]
    assert drop.optional and drop.describe() == "off|0:0.2"
    assert drop.suggest(optuna.trial.FixedTrial({"drop_cold.on": False})) == 0.0
    assert drop.suggest(optuna.trial.FixedTrial({"drop_cold.on": True,
                                                 "drop_cold": 0.1})) == 0.1
    assert drop.parameters(0.0) == {"drop_cold.on": False}
    assert drop.parameters(0.1) == {"drop_cold.on": True, "drop_cold": 0.1}
    assert knob_values({"drop_cold.on": False, "prefetch": "off"}) == {
        "drop_cold": 0.0, "prefetch": "off"}
    assert knob_values({"drop_cold.on": True, "drop_cold": 0.1}) == {"drop_cold": 0.1}
    # a range named with --space is searched as given
    named = {d.name: d for d in build_space("drop_cold=0.1:0.3", lossy=True).dimensions}
    assert not named["drop_cold"].optional and named["moce_bonus"].optional


def test_space_narrows_and_adds_fix_pins():
    space = build_space("prefetch_max=1:4,prefetch=prev|stale,expert_cache=8:32",
                        "decode_2q=1")
    got = space.describe()
    assert got["prefetch_max"] == "1:4" and got["prefetch"] == "prev|stale"
    assert got["expert_cache"] == "8:32"  # any knob with a range may be searched
    # the older name of a knob pins the knob
    assert got["cache_policy"] == "=2q" and space.fixed == {"cache_policy": "2q"}


@pytest.mark.parametrize("space, fix, message", [
    ("bogus=1:2", "", r"--space: unknown knob 'bogus'; searched by default: moce_bonus, "
                      r"drop_cold, "),
    ("prefetch_max=4", "", r"--space prefetch_max=4: a number is searched as low:high.*"
                           r"allowed: int in \[0, 512\]"),
    ("prefetch_max=4:2", "", "low 4 must be below high 2"),
    ("prefetch_max=0:900", "", r"prefetch_max \(STRATA_PREFETCH_MAX\) = 900 is not allowed: "
                               r"expected int in \[0, 512\]"),
    ("prefetch=off|fast", "", "expected one of off, prev, stale"),
    ("prefetch=off", "", "give two or more values as a|b"),
    ("model=a|b", "", "model is what every span measures.*--model on the command line"),
    ("", "workload=chat-cold", "--fix: workload is what every span measures.*--workload"),
    ("decode_2q", "", "'decode_2q' is not knob=low:high"),
    ("", "prefetch_max=x", r"--fix prefetch_max=x: .*expected int in \[0, 512\]"),
    ("cache_policy=lru|2q", "decode_2q=1", "both searched \\(--space\\) and pinned \\(--fix\\)"),
    ("", ",".join(f"{k.name}={k.default}" for k in KNOBS if k.search and not k.lossy),
     "nothing is left to search"),
])
def test_bad_space_or_fix_names_the_knob_and_what_is_allowed(space, fix, message):
    with pytest.raises(SettingsError, match=message):
        build_space(space, fix)
