"""Routing statistics of a session: popularity skew and predictor overlaps, as measured."""

from __future__ import annotations

import numpy as np


def skew(counts: np.ndarray) -> tuple[float, float]:
    """(share of routings taken by the top 10 % of experts in %, max / mean)."""
    total = counts.sum()
    if not total:
        return 0.0, 0.0
    top = np.sort(counts)[::-1][: max(1, len(counts) // 10)]
    return round(100 * top.sum() / total, 2), round(float(counts.max() / counts.mean()), 3)


def gini(counts: np.ndarray) -> float:
    """Gini coefficient of the routing counts: 0 when every expert is routed equally often,
    towards 1 when a few take everything."""
    c = np.sort(np.asarray(counts, dtype=np.float64))
    n, total = len(c), c.sum()
    if not total:
        return 0.0
    return round(float((2 * np.arange(1, n + 1) - n - 1) @ c / (n * total)), 3)


def entropy(counts: np.ndarray) -> float:
    """Entropy of the routing shares over the experts, normalised: 1 = uniform."""
    c = np.asarray(counts, dtype=np.float64)
    total = c.sum()
    if not total or len(c) < 2:
        return 0.0
    p = c[c > 0] / total
    return round(float(-(p * np.log(p)).sum() / np.log(len(c))), 3)


def routing_stats(session) -> dict:
    snap = session.snapshot()
    routed, _, _ = session.engine.counters.expert_counts(window=False)
    layers = []
    for row, counts in zip(snap["layers"], routed):
        share, ratio = skew(counts)
        layers.append({"layer": row["layer"], "routings": int(counts.sum()
                       // session.ckpt.config.top_k), "stale_pct": row["stale_pct"],
                       "prev_pct": row["prev_pct"], "ctrl_pct": row["ctrl_pct"],
                       "top10_share": share, "max_over_mean": ratio})
    totals = {k: snap["totals"][k] for k in ("stale_pct", "stale_whole_pct", "prev_pct",
                                             "prev_whole_pct", "ctrl_pct", "ctrl_whole_pct")}
    totals["top10_share"] = round(float(np.mean([r["top10_share"] for r in layers])), 2)
    return {"model": snap["model"]["name"], "tokens": snap["tokens"], "totals": totals,
            "layers": layers}
