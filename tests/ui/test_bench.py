"""The UI overhead benchmark runs and reports; its figures are printed, not judged, since
a short run on a shared machine says little (run it longer by hand)."""

from __future__ import annotations

from tuner.ui.bench import measure_ui_overhead


def test_measure_ui_overhead_reports_ratios(tiny_overrides, capsys):
    result = measure_ui_overhead(tiny_overrides, seconds=0.5, warmup=0.2)
    printed = capsys.readouterr().out
    with capsys.disabled():
        print("\n" + printed, end="")
    assert {"ratio_overview", "ratio_layers"} <= result.keys()
    assert result["alone_before"] > 0 and result["ui_layers"] > 0
    assert "ratio" in printed
