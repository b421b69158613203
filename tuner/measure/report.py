"""An A/B result as lines of text: what `tuner ab` prints and the terminal UI shows."""

from __future__ import annotations

from typing import Any


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f} %"


def knob_change(r: dict[str, Any]) -> str:
    diff = ", ".join(f"{d['knob']} {d['a']!r} -> {d['b']!r}" for d in r["knob_diff"])
    return diff or "identical settings"


def result_lines(r: dict[str, Any]) -> list[str]:
    """Per-arm figures, each pair, the mean difference, the drift and the verdict."""
    lines = []
    for arm in ("A", "B"):
        s = r["arms"][arm]
        stdev = "-" if s["stdev"] is None else f"{s['stdev']:.3f}"
        same = ("identical in every run" if s["identical"] else
                f"NOT identical across runs ({', '.join(s['differ'])} differ)")
        lines.append(f"arm {arm}: {s['mean']:.3f} ms/token mean, stdev {stdev} over "
                     f"{len(s['runs'])} runs; hit rate {s['hit_rate']} %, "
                     f"{s['bytes_per_token']} bytes/token, KL {s['quality_kl']} nats/token, "
                     f"top-1 agreement {s['top1_agreement']} %: {same}")
    lines += [f"pair {p['pair']}: B - A = {p['diff']:+.3f} ms/token ({_pct(p['pct'])}), "
              f"{p['sign']}" for p in r["pair_diffs"]]
    lines.append(f"mean difference B - A {r['diff']:+.3f} ms/token ({_pct(r['diff_pct'])}); "
                 f"drift sentinel A - first A {r['drift']:+.3f} ms/token "
                 f"({_pct(r['drift_pct'])}); spread {r['spread']:.3f} ms/token (the largest "
                 "stdev of the arms' runs and of the pairs)")
    lines.append(f"verdict: {r['verdict']}")
    return lines
