"""The knobs' interplay, declared once (tuner/interplay.py): its rules name real knobs, a
refusing rule refuses wherever settings come from, and a warning is an engine note."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tuner.interplay import RULES, Facts, refused, warnings
from tuner.knobs import BY_NAME, Config
from tuner.settings import SettingsError, load

FACTS = Facts(slots=64, top_k=4, cuda=False, direct=False, host_driven=False,
              batched_prefill=True, routed_by_trace=False)


def test_every_rule_names_knobs_of_the_table():
    for rule in RULES:
        assert rule.knobs and set(rule.knobs) <= set(BY_NAME), rule.knobs


def test_a_refusing_rule_refuses_settings_and_says_why():
    assert refused(Config()) == []
    assert refused(replace(Config(), io_workers=2, io_urgent=2))
    with pytest.raises(SettingsError, match=r"io_urgent \(2\) must be less than io_workers"):
        load(cli={"io_workers": "2", "io_urgent": "2"})


@pytest.mark.parametrize("changes, words", [
    ({"prefetch_route": True}, "prefetch_route is off"),
    ({"expert_cache": 65}, "capped at 64"),
    ({"pcie_frac": 0.3}, "act only with cpu_pool"),
    ({"cpu_pool": True, "prefetch": "stale"}, "prefetch is off with cpu_pool"),
    ({"moce_protect": 5}, "acts as 4"),
    ({"drop_cold": 0.2}, "drop_cold is on"),
    ({"moce_bonus": 0.5}, "the output differs from exact routing"),
])
def test_a_warning_says_what_a_knob_does_not_do_here(changes, words):
    assert not any(words in w for w in warnings(Config(), FACTS))
    assert any(words in w for w in warnings(replace(Config(), **changes), FACTS))


def test_reading_ahead_on_the_device_is_noted_where_misses_are_read_in_place():
    cfg = replace(Config(), prefetch="stale", expert_store="ram")
    direct = replace(FACTS, direct=True)
    assert any("read in place" in w for w in warnings(cfg, direct))
    assert not any("read in place" in w for w in warnings(cfg, FACTS))
    assert not any("read in place" in w for w in warnings(cfg, replace(direct,
                                                                      host_driven=True)))
