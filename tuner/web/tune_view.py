"""The tune panel's Pareto scatter: ms/token against the paired baseline (x) and bytes
read per token (y) of every trial that passed its guards, as inline SVG drawn here, so
the panel needs no script and every point is a measured trial."""

from __future__ import annotations

from html import escape
from typing import Any

W, H, PAD = 320, 180, 34  # the drawing and the margin the axis labels take


def _scale(values: list[float], size: int, flip: bool = False):
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    lo, hi = lo - 0.05 * span, hi + 0.05 * span

    def to(v: float) -> float:
        t = (v - lo) / (hi - lo)
        return round(PAD + (1 - t if flip else t) * (size - 2 * PAD), 1)

    return to, lo, hi


def pareto_svg(rows: list[dict[str, Any]], front: list[int]) -> str:
    done = [r for r in rows if r["state"] == "complete"]
    if not done:
        return '<p class="hint">no trial has passed its guards yet</p>'
    x, x_lo, x_hi = _scale([r["score_pct"] for r in done], W)
    y, y_lo, y_hi = _scale([r["bytes_per_token"] for r in done], H, flip=True)
    marks = []
    for r in done:
        cls = "front" if r["number"] in front else "trial"
        tip = (f"trial {r['number']}: {r['score_pct']:+.1f} % ms/token vs its baseline, "
               f"{r['bytes_per_token']} bytes/token")
        marks.append(f'<circle class="{cls}" cx="{x(r["score_pct"])}" '
                     f'cy="{y(r["bytes_per_token"])}" r="4"><title>{escape(tip)}</title>'
                     "</circle>")
    zero = (f'<line class="zero" x1="{x(0)}" y1="{PAD}" x2="{x(0)}" y2="{H - PAD}"/>'
            if x_lo <= 0 <= x_hi else "")
    axes = (f'<line class="axis" x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}"/>'
            f'<line class="axis" x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}"/>'
            f'<text x="{PAD}" y="{H - PAD + 14}">{x_lo:+.1f} %</text>'
            f'<text x="{W - PAD}" y="{H - PAD + 14}" text-anchor="end">{x_hi:+.1f} %</text>'
            f'<text x="{W / 2}" y="{H - 4}" text-anchor="middle">ms/token vs baseline</text>'
            f'<text x="2" y="{PAD - 6}">{y_hi / 1e6:.2f} MB</text>'
            f'<text x="2" y="{H - PAD}">{y_lo / 1e6:.2f}</text>'
            f'<text x="2" y="12">bytes/token (front filled; left and low is better)</text>')
    return (f'<svg id="tune-pareto" viewBox="0 0 {W} {H}" role="img" '
            f'aria-label="Pareto scatter of {len(done)} trials">{axes}{zero}'
            f'{"".join(marks)}</svg>')
