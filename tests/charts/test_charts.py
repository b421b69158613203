"""The charts of an A/B and of a tune: one mark per measured run, pair and trial, the same
SVG for the same data, and `--plot` on `tuner ab` and `tuner tune`."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tuner import charts
from tuner.cli import main
from tuner.measure.compare import compare

SVG = "{http://www.w3.org/2000/svg}"


def marks(svg: str, gid: str) -> int:
    """The markers drawn in the group `gid` (a scatter's points are `<use>` elements)."""
    group = next(e for e in ET.fromstring(svg).iter() if e.get("id") == gid)
    return sum(1 for e in group.iter(f"{SVG}use"))


def ab_runs(ms: list[float]) -> list[dict]:
    return [{"run": i + 1, "arm": "AB"[i % 2], "workload": "corpus", "ms_per_token": v}
            for i, v in enumerate(ms)]


def test_the_ab_chart_has_a_mark_per_run_and_a_bar_per_pair():
    ms = [50.0, 47.5, 50.4, 47.2, 50.1, 47.9, 50.3]
    result = {**compare(ms), "workload": "corpus"}
    svg = charts.svg(charts.ab_chart(ab_runs(ms), result, ("baseline", "2q")))
    assert marks(svg, "ab-runs-A") == 4 and marks(svg, "ab-runs-B") == 3
    assert [f'id="ab-pair-{i}"' in svg for i in (1, 2, 3, 4)] == [True, True, True, False]
    assert "B faster than A" in svg and "A = baseline" in svg  # text stays text
    assert svg == charts.svg(charts.ab_chart(ab_runs(ms), result, ("baseline", "2q")))


def test_an_ab_still_running_draws_its_runs_alone():
    svg = charts.svg(charts.ab_chart(ab_runs([50.0, 47.5]), None))
    assert marks(svg, "ab-runs-A") == 1 and marks(svg, "ab-runs-B") == 1
    assert "ab-pair-1" not in svg and "sentinel" not in svg


def test_the_tune_chart_marks_every_scored_trial_and_the_front():
    rows = [{"number": n, "state": state, "score_pct": score, "bytes_per_token": b}
            for n, state, score, b in ((0, "complete", 0.4, 36e6), (1, "complete", -8.0, 35e6),
                                       (2, "fail", None, None), (3, "complete", -3.0, 30e6),
                                       (4, "complete", 2.0, 37e6))]
    svg = charts.svg(charts.tune_chart(rows, [1, 3]))
    assert marks(svg, "tune-trials") == 4 and marks(svg, "tune-front") == 2
    assert marks(svg, "tune-history") == 4
    assert "trial 1" in svg and "trial 3" in svg and "trial 4" not in svg
    assert "rejected or failed (1)" in svg


def test_a_plot_file_must_name_a_format():
    assert charts.plot_format("out.SVG") == "svg"
    with pytest.raises(charts.PlotError, match=r"must end in \.svg, \.png, \.pdf"):
        charts.plot_format("out.txt")


def tiny_flags(model) -> list[str]:
    return ["--model", str(model), "--expert-cache", "16", "--io-workers", "3",
            "--io-urgent", "1"]


def test_ab_and_tune_write_their_charts(tiny_model, tmp_path, capsys):
    ab = tmp_path / "ab.svg"
    assert main(["ab", "baseline", "2q", "--pairs", "1", "--tokens", "24", "--warmup", "0",
                 "--plot", str(ab), *tiny_flags(tiny_model)]) == 0
    svg = ab.read_text()
    assert marks(svg, "ab-runs-A") == 2 and marks(svg, "ab-runs-B") == 1
    tune = tmp_path / "tune.png"
    assert main(["tune", "--trials", "2", "--tokens", "8", "--warmup", "4", "--ab-pairs", "0",
                 "--plot", str(tune), *tiny_flags(tiny_model)]) == 0
    assert tune.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"chart written to {tune}" in capsys.readouterr().out


def test_a_bad_plot_file_is_refused_before_anything_runs(capsys):
    assert main(["ab", "baseline", "2q", "--plot", "runs.txt"]) == 2
    assert main(["tune", "--plot", "trials.jpg"]) == 2
    err = capsys.readouterr().err
    assert "tuner ab: --plot runs.txt: the file must end in .svg, .png, .pdf" in err
    assert "--plot trials.jpg" in err
