"""The UI overhead benchmark runs both modes and reports; its figures are printed, not
judged, since a short run on a shared machine says little (`tuner bench --only ui` runs
it at length)."""

from __future__ import annotations

import pytest

from tuner.settings import load
from tuner.ui.bench import lines, measure_ui_overhead


@pytest.mark.slow  # fresh sessions and a UI process of its own per phase
def test_measures_the_embedded_and_the_connected_ui_against_none(tiny_overrides, capsys):
    # fast repaints: the tiny model decodes a phase in a second or so, a few repaints
    result = measure_ui_overhead(load(cli=tiny_overrides), tokens=120, rounds=1, refresh_hz=10)
    with capsys.disabled():
        print("\n" + "\n".join(lines(result)))
    assert len(result["alone_tok_s"]) == 2 and min(result["alone_tok_s"]) > 0
    for mode in ("embedded", "connected"):
        for screen in ("overview", "layers"):
            figures = result[mode][screen]
            assert figures["tok_s"] > 0 and len(figures["ratios"]) == 1
            assert figures["ui_cpu"] > 0  # the UI ran: its process or thread used the CPU
            assert figures["terminal_kib_s"] > 0  # and it drew for a terminal


@pytest.mark.parametrize("kwargs", [{"modes": ("embedded", "remote")}, {"modes": ()},
                                    {"tokens": 0}, {"rounds": 0}])
def test_refuses_what_it_cannot_measure(tiny_overrides, kwargs):
    with pytest.raises(ValueError, match="must be"):
        measure_ui_overhead(load(cli=tiny_overrides), **kwargs)
