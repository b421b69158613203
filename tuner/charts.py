"""Charts of an A/B's runs and pairs and of a tune's trials and Pareto front, drawn by
matplotlib: `tuner ab --plot`, `tuner tune --plot` and the page's results read this one
module, so a chart on the page and in a file are the same picture. Every mark is a
measured run or trial, nothing is smoothed or fitted.

The A/B chart has two panels: ms per token of every run in the order they ran (A B A B
... A, the sentinel A last, each pair joined), and each pair's B - A in % of its A, with
the mean and the drift between the first A and the sentinel beside them. The tune chart is
optuna-dashboard's two: each trial's score against its paired baseline in the order they
ran, with the best so far, and ms per token against bytes per token with the Pareto front.

matplotlib is imported when a chart is drawn, never with this module, so a command that
draws none starts without it. SVG keeps its text as text (smaller, and searchable on the
page) and is the same bytes for the same data: ids are salted with a fixed string and the
date is left out.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.errors import TunerError

Row = Mapping[str, Any]  # an A/B's run or result, a tune's trial: plain data, as views hold it

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FORMATS = ("svg", "png", "pdf")  # what --plot writes, by the file's suffix
A_COLOUR, B_COLOUR = "#2563eb", "#ea580c"
FASTER, SLOWER, MUTED = "#15803d", "#b91c1c", "#6b7280"
# No date and no creator (matplotlib's version): the same data gives the same bytes
METADATA = {"svg": {"Date": None, "Creator": None}, "pdf": {"CreationDate": None, "Creator": None},
            "png": {"Software": None}}
STYLE = {"svg.fonttype": "none", "svg.hashsalt": "tuner", "font.size": 9,
         "axes.spines.top": False, "axes.spines.right": False}


class PlotError(TunerError):
    """A --plot file this module cannot write."""


def plot_format(path: str | Path) -> str:
    """The format a --plot file is written in, from its suffix; checked before a command
    measures anything."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise PlotError(f"--plot {path}: the file must end in "
                        f"{', '.join('.' + f for f in FORMATS)}")
    return suffix


def _figure(width: float = 10.0, height: float = 3.6) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


# -- A/B -----------------------------------------------------------------------------------
def ab_chart(runs: Sequence[Row], result: Row | None = None,
             labels: tuple[str, str] = ("A", "B")) -> Figure:
    """`runs` as measured so far (an A/B that is still running, or was stopped, has no
    `result`: then only the runs panel is drawn)."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        fig = _figure()
        left, right = fig.subplots(1, 2, width_ratios=(3, 2)) if result else (
            fig.subplots(1, 1), None)
        _runs_panel(left, runs, labels)
        if result and right is not None:
            _pairs_panel(right, result)
            fig.suptitle(f"A = {labels[0]}, B = {labels[1]}: {_short(result['verdict'])}",
                         fontsize=10, ha="left", x=0.01)
    return fig


def _short(verdict: str, limit: int = 110) -> str:
    return verdict if len(verdict) <= limit else verdict[:limit - 3].rstrip() + "..."


def _runs_panel(ax: Axes, runs: Sequence[Row], labels: tuple[str, str]) -> None:
    timed = [r for r in runs if r.get("ms_per_token") is not None]
    for arm, colour, marker, label in (("A", A_COLOUR, "o", labels[0]),
                                       ("B", B_COLOUR, "s", labels[1])):
        mine = [r for r in timed if r["arm"] == arm]
        points = ax.scatter([r["run"] for r in mine], [r["ms_per_token"] for r in mine],
                            c=colour, marker=marker, s=36, zorder=3,
                            label=f"{arm} = {label}")
        points.set_gid(f"ab-runs-{arm}")
    by_workload: dict[str, list[Row]] = {}
    for r in timed:
        by_workload.setdefault(r["workload"], []).append(r)
    for i, (workload, mine) in enumerate(by_workload.items()):
        for a, b in zip(mine[0::2], mine[1::2]):  # A B A B ... A: each pair joined
            ax.plot([a["run"], b["run"]], [a["ms_per_token"], b["ms_per_token"]],
                    color=MUTED, linewidth=0.8, zorder=2)
        first_a, last = mine[0], mine[-1]
        if len(mine) % 2 == 1 and len(mine) > 1:  # the sentinel A has run: the drift
            ax.plot([first_a["run"], last["run"]],
                    [first_a["ms_per_token"], last["ms_per_token"]], color=A_COLOUR,
                    linestyle=":", linewidth=1, label="drift" if i == 0 else None)
            ax.annotate("sentinel A", (last["run"], last["ms_per_token"]),
                        textcoords="offset points", xytext=(4, 6), fontsize=8, color=MUTED)
        if len(by_workload) > 1:
            ax.axvline(first_a["run"] - 0.5, color="#d1d5db", linewidth=0.8)
            ax.annotate(workload, (first_a["run"] - 0.4, 1), xycoords=("data", "axes fraction"),
                        va="top", fontsize=8, color=MUTED)
    ax.set_xlabel("run, in the order run")
    ax.set_ylabel("ms per token")
    ax.set_title("every run", loc="left")
    ax.xaxis.get_major_locator().set_params(integer=True)
    if timed:
        ax.legend(loc="lower right", fontsize=8, frameon=False)


def _pairs_panel(ax: Axes, result: Row) -> None:
    workloads = result.get("workloads") or [result]
    many = len(workloads) > 1
    names, pcts = [], []
    for w in workloads:
        for p in w["pair_diffs"]:
            names.append(f"{w['workload']} {p['pair']}" if many else str(p["pair"]))
            pcts.append(p["pct"] if p["pct"] is not None else 0.0)
    bars = ax.bar(range(len(pcts)), pcts, color=[FASTER if v < 0 else SLOWER for v in pcts],
                  width=0.6)
    for i, bar in enumerate(bars):
        bar.set_gid(f"ab-pair-{i + 1}")
    ax.axhline(0, color=MUTED, linewidth=0.8)
    if result.get("diff_pct") is not None:
        ax.axhline(result["diff_pct"], color="#111827", linestyle="--", linewidth=1,
                   label=f"mean {result['diff_pct']:+.1f} %")
    if result.get("drift_pct") is not None:
        ax.axhline(result["drift_pct"], color=A_COLOUR, linestyle=":", linewidth=1,
                   label=f"drift {result['drift_pct']:+.1f} %")
    ax.set_xticks(range(len(names)), names, rotation=30 if many else 0)
    ax.set_xlabel("pair" + (" (the first workload's mean and drift)" if many else ""))
    ax.set_ylabel("B - A, % of A's ms per token")
    ax.set_title("each pair (below 0: B faster)", loc="left")
    ax.legend(loc="best", fontsize=8, frameon=False)


# -- tune ----------------------------------------------------------------------------------
def tune_chart(rows: Sequence[Row], front: list[int]) -> Figure:
    """`rows`: the trials as `tuner.tune.study.row` gives them; `front`: the trial numbers
    on the Pareto front."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        fig = _figure()
        history, pareto = fig.subplots(1, 2)
        scored = [r for r in rows if r["state"] == "complete" and r["score_pct"] is not None]
        on_front = [r for r in scored if r["number"] in front]
        _history_panel(history, rows, scored, on_front)
        _pareto_panel(pareto, scored, on_front)
    return fig


def _history_panel(ax: Axes, rows: Sequence[Row], scored: list[Row],
                   on_front: list[Row]) -> None:
    trials = ax.scatter([r["number"] for r in scored], [r["score_pct"] for r in scored],
                        facecolors="none", edgecolors=A_COLOUR, s=30, label="passed")
    trials.set_gid("tune-history")
    ax.scatter([r["number"] for r in on_front], [r["score_pct"] for r in on_front],
               c=A_COLOUR, s=30, label="on the front")
    best, xs, ys = None, [], []
    for r in sorted(scored, key=lambda r: r["number"]):
        best = r["score_pct"] if best is None else min(best, r["score_pct"])
        xs.append(r["number"])
        ys.append(best)
    if xs:
        ax.step(xs, ys, where="post", color=SLOWER, linewidth=1, label="best so far")
    failed = [r for r in rows if r not in scored]
    if failed:  # no score to place: marked along the top, with the reason in the table
        ax.scatter([r["number"] for r in failed], [1.0] * len(failed), marker="x",
                   c=MUTED, s=24, transform=ax.get_xaxis_transform(), clip_on=False,
                   label=f"rejected or failed ({len(failed)})")
    ax.axhline(0, color="#d1d5db", linestyle="--", linewidth=0.8)
    ax.set_xlabel("trial")
    ax.set_ylabel("ms per token vs its baseline, %")
    ax.set_title("every trial (lower is faster)", loc="left")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="best", fontsize=8, frameon=False)


def _pareto_panel(ax: Axes, scored: list[Row],
                  on_front: list[Row]) -> None:
    mb = [r["bytes_per_token"] / 1e6 for r in scored]
    trials = ax.scatter([r["score_pct"] for r in scored], mb, facecolors="none",
                        edgecolors=MUTED, s=30, label="passed")
    trials.set_gid("tune-trials")
    ordered = sorted(on_front, key=lambda r: r["score_pct"])
    front = ax.scatter([r["score_pct"] for r in ordered],
                       [r["bytes_per_token"] / 1e6 for r in ordered], c=A_COLOUR, s=36,
                       zorder=3, label="Pareto front")
    front.set_gid("tune-front")
    if ordered:
        ax.step([r["score_pct"] for r in ordered], [r["bytes_per_token"] / 1e6 for r in ordered],
                where="post", color=A_COLOUR, linewidth=1)
    for r in ordered:
        ax.annotate(f"trial {r['number']}", (r["score_pct"], r["bytes_per_token"] / 1e6),
                    textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.axvline(0, color="#d1d5db", linestyle="--", linewidth=0.8)
    ax.set_xlabel("ms per token vs its baseline, %")
    ax.set_ylabel("MB read per token")
    ax.set_title("speed against bytes (left and low is better)", loc="left")
    ax.legend(loc="best", fontsize=8, frameon=False)


# -- output --------------------------------------------------------------------------------
def svg(fig: Figure) -> str:
    """The chart as an `<svg>` element to put in a page."""
    import matplotlib

    out = io.StringIO()
    with matplotlib.rc_context(STYLE):
        fig.savefig(out, format="svg", metadata=METADATA["svg"])
    text = out.getvalue()
    return text[text.index("<svg"):]


def write(fig: Figure, path: str | Path) -> Path:
    """Writes the chart to `path` in the format its suffix names."""
    import matplotlib

    path = Path(path)
    kind = plot_format(path)
    with matplotlib.rc_context(STYLE):
        fig.savefig(path, format=kind, dpi=150, metadata=METADATA[kind])
    return path
