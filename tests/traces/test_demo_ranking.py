"""Does a decision made on the demo model transfer? The demo model's figures (as `tuner
realism` shows them: measured from the demo model this version makes, shipped in
tuner/traces/data/demo_routing.json; test_realism checks they are this version's) against a
table of real figures kept here, from the public multi-layer route logs (checked equal to
the shipped ones, so a change to either is seen).

Kendall's tau-b is taken size by size over the modes both measured (Mixtral's log has no
lru+prev). What the demo reaches is asserted as it stands, so a demo model that ranks worse
fails here; the results page of the v5 demo model says what it reaches, what it does not
and why.
"""

from __future__ import annotations

import pytest

from tuner.traces import realism

# Hit % at 15 / 25 / 50 % of each log's layer-expert pairs (lru, 2q, opt, static,
# static_half, lru+prev, lru+oracle; None: not measured): Mixtral-8x7B-Instruct decode
# (Mario928/speculative-moe), DeepSeek-V2-Lite-Chat prefill (ngavhane/moe-beyond),
# Qwen1.5-MoE-A2.7B decode and prefill (weiran0129/vLLM-MoE-Logger).
MODES = ("lru", "2q", "opt", "static", "static_half", "lru+prev", "lru+oracle")
REAL = {
    "Mixtral-8x7B decode": (
        (0.0, 37.4, 55.6), (0.0, 16.7, 48.5), (44.2, 60.3, 81.8), (20.0, 32.2, 59.0),
        (15.4, 25.3, 51.0), (None, None, None), (96.9, 97.4, 98.4)),
    "DeepSeek-V2-Lite prefill": (
        (28.14, 45.63, 69.46), (12.81, 26.27, 51.87), (58.69, 71.31, 89.01),
        (23.94, 36.24, 62.6), (21.85, 33.61, 59.03), (28.14, 45.63, 69.46),
        (59.11, 74.31, 90.99)),
    "Qwen1.5-MoE decode": (
        (17.34, 29.29, 55.44), (13.37, 25.83, 52.65), (47.56, 61.11, 82.05),
        (21.43, 33.31, 59.91), (20.98, 32.79, 59.43), (17.34, 29.29, 55.44),
        (56.34, 66.09, 83.61)),
    "Qwen1.5-MoE prefill": (
        (22.28, 32.77, 60.04), (16.1, 30.2, 59.77), (50.06, 63.8, 84.2),
        (25.97, 39.92, 67.98), (25.81, 39.26, 67.63), (22.28, 32.77, 60.04),
        (60.17, 68.31, 85.79)),
}
SIZES = realism.SHARES_PCT


@pytest.fixture(scope="module")
def demo() -> realism.Routing:
    return realism.demo_routing()[0]


@pytest.fixture(scope="module")
def public() -> dict[str, realism.Routing]:
    return {p.name: p for p in realism.public_logs() if p.layers > 1}


def test_the_table_here_is_the_shipped_public_figures(public):
    assert {name: tuple(tuple(p.hit_rate[m]) for m in MODES)
            for name, p in public.items()} == REAL


# tau the demo's ranking reaches against each log at 15 / 25 / 50 % of the pairs: the
# target, 0.8 everywhere, needs lru+oracle > opt > static > lru > static_half > 2q at every
# size (the only order within 0.8 of all four logs): reading ahead above Belady (two of a
# top-4 routing's experts read ahead win back more than Belady's lead over LRU; of a
# top-6 routing, as v4's, less), and LRU between pinning from the whole trace and from its
# first half (v5's experts lean by domain, so the halves differ by 1.6-2.8 pp).
REACHED = {"Mixtral-8x7B decode": (0.8, 0.85, 1.0),
           "DeepSeek-V2-Lite prefill": (0.8, 0.8, 0.8),
           "Qwen1.5-MoE decode": (0.8, 0.8, 0.8),
           "Qwen1.5-MoE prefill": (0.8, 0.8, 0.8)}


@pytest.mark.parametrize("log", list(REAL))
def test_the_demos_ranking_agrees_with_real_logs(demo, public, log):
    got = realism.taus(demo, public[log])
    assert all(t is not None and t >= floor for t, floor in zip(got, REACHED[log])), (log, got)


def test_lru_between_pinning_from_the_whole_trace_and_from_its_first_half(demo):
    """What a tau of 0.8 against every log asks at every size: pinning the most-routed
    pairs ahead of LRU, and LRU ahead of pinning from the first half. The logs that pin
    ahead do so by 3.4-20 pp; the demo's lead (0.3-0.9 pp) stays under its halves' gap
    (1.6-2.8 pp): on this family of routings a lead the size of the logs' put LRU below
    both pinnings, the Qwen1.5 logs' order, as v4's 5.6-5.8 pp did (the v5 results page)."""
    for i in range(len(SIZES)):
        lead = realism.lead(demo, "static", "lru", i)
        assert 0 < lead < realism.lead(demo, "static", "static_half", i), SIZES[i]


def test_every_shape_figure_inside_the_real_logs_range(demo, public):
    for key, _, _ in realism.SHAPE:
        seen = [p.shape[key] for p in public.values() if p.shape.get(key) is not None]
        assert min(seen) <= demo.shape[key] <= max(seen), (key, demo.shape[key], seen)


def test_layers_as_real_logs_have_them(demo, public):
    """The first layer is the least local (its prev-token overlap below the average, as on
    every real log that has it), and per-layer cacheability goes with depth inside the
    logs' range at every size."""
    measured = [p for p in public.values() if p.shape.get("prev_first_pct") is not None]
    assert len(measured) == 3 and all(p.shape["prev_first_pct"] < p.shape["prev_pct"]
                                      for p in measured)
    assert demo.shape["prev_first_pct"] < demo.shape["prev_pct"]
    for i in range(len(SIZES)):
        seen = [p.depth_rho[i] for p in public.values() if p.depth_rho[i] is not None]
        assert min(seen) <= demo.depth_rho[i] <= max(seen), (SIZES[i], demo.depth_rho[i], seen)
