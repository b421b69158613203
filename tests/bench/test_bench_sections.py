"""`tuner bench`'s engine sections on the tiny model: each prints its ratio, and the pieces
of a figure add up to it (no timing is asserted)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest

from tuner.cli import main


@pytest.fixture(scope="module")
def bench(tiny_model, tmp_path_factory):
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, redirect_stdout(out):
        mp.setenv("TUNER_HOME", str(tmp_path_factory.mktemp("home")))  # the int4 copy
        assert main(["bench", "--only", "machinery,limit,quant,prefetch,peer", "--tokens", "8",
                     "--json", "--model", str(tiny_model), "--expert-cache", "16",
                     "--io-workers", "2", "--io-urgent", "1", "--device", "cpu"]) == 0
    return json.loads(out.getvalue())


def test_machinery_runs_every_lookup_as_a_hit(bench):
    r = bench["machinery"]
    assert r["hit_rate"] == 100.0 and r["ratio"] > 0
    q1, q3 = r["ratio_quartiles"]  # the median of the pairs lies between
    assert q1 <= r["ratio"] <= q3


def test_limit_is_the_sum_of_its_measured_pieces(bench):
    r = bench["limit"]
    assert r["floor_ms_per_token"] == pytest.approx(r["hbm_ms"] + r["transfer_ms"], abs=0.002)
    assert r["hbm_ms"] == pytest.approx(
        1000 * r["active_bytes_per_token"] / (r["hbm_gbps"] * 1e9), abs=0.002)
    compute = max(r["hbm_ms"], r["compute_ms"]) + r["transfer_ms"]
    assert r["compute_floor_ms_per_token"] == pytest.approx(compute, abs=0.002)
    current = r["dense_ms"] + r["expert_ms"] + r["transfer_ms"]
    assert r["current_floor_ms_per_token"] == pytest.approx(current, abs=0.002)
    for ratio, floor in (("ratio", "floor_ms_per_token"),
                         ("compute_ratio", "compute_floor_ms_per_token"),
                         ("current_ratio", "current_floor_ms_per_token")):
        # the times are rounded to 3 places and the ratio of the unrounded ones to 4: a
        # floor of a few tenths of a ms moves the quotient of the rounded ones by 0.2 %
        low, high = ((r["engine_ms_per_token"] - d) / (r[floor] + d) for d in (5e-4, -5e-4))
        assert low - 5e-5 <= r[ratio] <= high + 5e-5
    assert r["miss_bytes_per_token"] == pytest.approx(r["misses_per_token"] * 24576, rel=1e-3)
    assert r["link_gbps"] is None and r["store_gbps"] > 0  # no link without a GPU
    # the tiny model: 4 layers x 4 experts of 24,576 bytes are part of what a token reads
    assert r["active_bytes_per_token"] > 4 * 4 * 24576


def test_prefetch_prices_the_stale_gate_against_none_with_each_store(bench):
    r = bench["prefetch"]
    assert set(r["stores"]) == {"ram", "disk"}
    for store in r["stores"].values():
        assert store["stale_ms_per_token"] > 0 and store["none_ms_per_token"] > 0
        off, stale = store["per_token"]["off"], store["per_token"]["stale"]
        assert off["pf_issued"] == 0 and stale["pf_issued"] > 0
        # speculation is claimed or not, never both: it cannot exceed what was issued
        assert stale["pf_timely"] + stale["pf_late"] <= stale["pf_issued"]
        moved = [f["bytes_demand"] + f["bytes_spec"] for f in (stale, off)]
        assert store["bytes_ratio"] == pytest.approx(moved[0] / moved[1], abs=1e-3)
        assert store["same_output"] is True  # speculation never changes what is computed
        q1, q3 = store["ratio_quartiles"]  # the median of the pairs lies between
        assert q1 <= store["ratio"] <= q3
        assert len(store["none_runs"]) == len(store["stale_runs"]) == r["turns"]
    # the RAM store on the CPU reads misses in place: the bodies read ahead, none is late
    assert r["stores"]["ram"]["per_token"]["stale"]["pf_late"] == 0


def test_quant_compares_bytes_at_the_same_arena_share(bench):
    r = bench["quant"]
    assert (r["bits"], r["group"]) == (4, 32)  # the tiny model's experts are 32 wide
    assert r["source_expert_bytes"] / r["expert_bytes"] == pytest.approx(32 / 4.5)
    assert r["ratio"] == pytest.approx(r["source_bytes_per_token"] / r["bytes_per_token"],
                                       abs=1e-3)
    assert 0 <= r["quality"]["top1_agreement_pct"] <= 100


def test_peer_decodes_the_same_tokens_as_transformers(bench):
    r = bench["peer"]
    assert r["first_difference"] == {"resident": None, "hf": None, "offload": None}
    assert r["engine_vs_offload"] > 0 and r["resident_vs_hf"] > 0
