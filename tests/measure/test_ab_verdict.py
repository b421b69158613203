"""The A/B verdict on constructed timings: it refuses differences smaller than the drift
between the first A and the sentinel A, or than the spread of the runs."""

from __future__ import annotations

import pytest

from tuner.measure.compare import compare, schedule


def test_schedule_interleaves_and_ends_with_a_sentinel():
    assert schedule(3) == ["A", "B", "A", "B", "A", "B", "A"]
    with pytest.raises(ValueError, match="at least 1 pair"):
        schedule(0)


def test_a_clear_difference_is_readable():
    # A B A B A B A: B about 2 ms/token slower in every pair, the machine steady.
    r = compare([10.0, 12.1, 10.2, 12.0, 9.9, 12.2, 10.1])
    assert r["readable"]
    assert r["diff"] == pytest.approx((2.1 + 1.8 + 2.3) / 3, abs=1e-4)  # mean of the pairs
    assert r["drift"] == pytest.approx(0.1)
    assert [p["sign"] for p in r["pair_diffs"]] == ["B slower"] * 3
    assert r["verdict"] == "B slower than A by 2.067 ms/token (+20.6 %); 3 of 3 pairs agree"
    assert r["arms"]["A"]["runs"] == [10.0, 10.2, 9.9, 10.1]  # the sentinel counts for A


def test_a_drift_larger_than_the_difference_is_not_readable():
    # Each pair says B is 0.5 ms/token slower, but the machine slowed by 0.6 from the
    # first A to the sentinel: the comparison is contaminated (seed 001).
    r = compare([10.0, 10.5, 10.0, 10.5, 10.6])
    assert r["diff"] == pytest.approx(0.5) and r["drift"] == pytest.approx(0.6)
    assert r["spread"] < r["diff"]  # only the drift makes it unreadable
    assert not r["readable"]
    assert r["verdict"].startswith("not readable: the drift between the first A and the "
                                   "sentinel A (+0.600 ms/token) is at least the A/B "
                                   "difference (+0.500 ms/token)")
    assert "spread" not in r["verdict"]


def test_a_difference_inside_the_spread_is_not_readable():
    r = compare([10.0, 13.0, 12.0, 10.0, 10.1])  # pairs disagree in sign
    assert r["diff"] == pytest.approx(0.5) and abs(r["drift"]) < r["diff"]
    assert not r["readable"]
    assert "inside the spread of the runs and pairs" in r["verdict"]
    assert [p["sign"] for p in r["pair_diffs"]] == ["B slower", "B faster"]


def test_pairs_that_disagree_widen_the_spread():
    # Each arm varies less than the A/B difference, but the pairs disagree: +2.0 then +0.2
    # ms/token, a spread wider than their mean.
    r = compare([10.0, 12.0, 11.0, 11.2, 10.5])
    assert max(r["arms"]["A"]["stdev"], r["arms"]["B"]["stdev"]) < r["diff"] < r["pair_stdev"]
    assert not r["readable"] and "inside the spread" in r["verdict"]


def test_an_a_a_run_reports_a_difference_inside_its_spread():
    # The same settings on both arms: timings differ only by noise.
    r = compare([10.00, 10.21, 9.93, 10.08, 10.17, 9.88, 10.04, 10.12, 9.97])
    assert abs(r["diff"]) < r["spread"]
    assert not r["readable"] and "inside the spread" in r["verdict"]


def test_few_pairs_must_clear_the_t_interval():
    # The H200's 2-pair A/A of identical settings: the difference (-2.376 ms/token) was
    # larger than the drift (-1.75) and the largest stdev (2.23), yet 2 pairs cannot tell.
    r = compare([40.0, 38.577, 38.757, 35.429, 38.25])
    assert r["diff"] == pytest.approx(-2.3755) and r["spread"] < abs(r["diff"])
    assert abs(r["drift"]) < abs(r["diff"])
    assert not r["readable"]
    assert "inside the 95% interval of the mean pair difference (+/-12.1" in r["verdict"]
    assert "one pair gives no spread" in compare([10.0, 14.0, 10.0])["verdict"]


def test_timings_must_follow_the_schedule():
    with pytest.raises(ValueError, match="expected A B A B ... A"):
        compare([1.0, 2.0])
    with pytest.raises(ValueError, match="expected A B A B ... A"):
        compare([1.0, 2.0, 1.0, 2.0])


def test_the_verdict_and_the_report_write_the_same_difference():
    """Once they rounded the same difference two ways (+4.196 vs +4.195; -6.2 % vs -6.1 %)."""
    from tuner.control.report import result_lines

    for a, b in ((10.0, 14.19549), (67.0, 62.8799), (10.0, 10.61496)):
        r = compare([a, b] * 3 + [a])
        assert r["readable"]
        r["arms"]["A"].update(identical=True, differ=[], hit_rate=50.0, bytes_per_token=1,
                                 quality_kl=0.0, top1_agreement=100.0)
        r["arms"]["B"].update(identical=True, differ=[], hit_rate=50.0, bytes_per_token=1,
                                 quality_kl=0.0, top1_agreement=100.0)
        mean_line = next(line for line in result_lines(r) if line.startswith("mean difference"))
        shown = mean_line.split("mean difference B - A ")[1].split(" ms/token (")
        diff, pct = shown[0], shown[1].split(" %)")[0]
        assert f"by {diff.lstrip('+-')} ms/token ({pct} %)" in r["verdict"], (mean_line,
                                                                               r["verdict"])
