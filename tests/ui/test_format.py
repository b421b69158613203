"""Figures, shading and trends: plain functions of snapshot values."""

from __future__ import annotations

from tuner.format import MISSING, figure, levels
from tuner.ui.history import History
from tuner.ui.widgets.spark import BARS, heights
from tuner.vocabulary.counters import HEADLINES


def test_figures_in_their_units():
    assert figure(None) == MISSING
    assert figure(1234567) == "1,234,567"
    assert figure(3.0) == "3"
    assert figure(6.225) == "6.22"
    assert figure(0.0862) == "0.0862"
    assert figure(61.123, "%") == "61.1"
    assert figure(0.86, "ms") == "0.86"
    assert figure(512, "bytes") == "512 B"
    assert figure(152863, "bytes") == "149.3 KiB"
    assert figure(3 * 1024**4 * 2048, "bytes") == "6144.0 TiB"
    # per-token units are written as their quantity is
    assert figure(152863.0, "bytes/token") == "149.3 KiB"
    assert figure(1234.5, "ms/token") == "1,234.50"
    assert figure(2.5, "experts/token") == "2.50"


def test_levels_place_values_between_the_column_extremes():
    assert levels([0, 5, 10], 6) == [0, 3, 5]
    assert levels([None, 2, 2], 6) == [None, 0, 0]
    assert levels([None, None], 6) == [None, None]


def snapshot(tokens: int, **totals) -> dict:
    return {"tokens": tokens, "window": {"totals": totals}}


def test_history_takes_one_point_per_new_token_count_and_skips_unmeasured():
    history = History(length=3)
    history.record(snapshot(1, ms_per_token=5.0, issue_usefulness=None))
    history.record(snapshot(1, ms_per_token=9.0))  # the same tokens: a repeated snapshot
    for t in range(2, 5):
        history.record(snapshot(t, ms_per_token=float(t)))
    assert list(history.points["ms_per_token"]) == [2.0, 3.0, 4.0]
    assert list(history.points["issue_usefulness"]) == []
    assert set(history.points) == {h.key for h in HEADLINES}


def test_spark_bars_span_the_smallest_to_the_largest_point():
    assert heights([]) == []
    assert heights([1.0, 3.0, 2.0]) == [0, len(BARS) - 1, 4]  # 3.5 rounds to even
    assert heights([5.0, 5.0]) == [3, 3]  # a flat line sits in the middle
