"""(a) read on the tiny model: the store's best raw read over every reader and shape tried,
and the engine's reads with every reader here (the KvikIO reader on its stand-in), the
headline the one `io_reader` picks. No timing is asserted."""

from __future__ import annotations

import pytest

from tests.engine.kvikio_standin import installed
from tuner.bench import read
from tuner.bench.sections import Options
from tuner.knobs import Config


@pytest.mark.parametrize("io_reader", ["auto", "kvikio"])
def test_read_measures_the_raw_read_and_the_engine_with_each_reader(tiny_model, monkeypatch,
                                                                    io_reader):
    cfg = Config(model=str(tiny_model), expert_cache=16, io_workers=2, io_urgent=1,
                 device="cpu", io_reader=io_reader)
    with installed(monkeypatch):
        r = read.measure(cfg, 8, Options())
    # both readers measured where KvikIO reads; auto takes the threads on the CPU device
    readers = ("threads", "kvikio")
    assert r["reader"] == ("threads" if io_reader == "auto" else "kvikio")
    tried = r["raw"]["tried"]
    assert [(t["reader"], t["workers"], t["piece_kib"]) for t in tried] == [
        (reader, w, p) for reader in readers for w, p in ((2, 256), (2, 4096), (32, 4096))]
    assert r["raw_gbps"] == r["raw"]["gbps"] == max(t["gbps"] for t in tried)
    assert r["raw"]["direct"] and r["raw"]["experts"] == 64  # the tiny model's every expert
    assert set(r["readers"]) == set(readers) and r["engine"] == r["readers"][r["reader"]]
    for name, e in r["readers"].items():
        assert e["reader"] == name and e["bytes_read"] > 0
        # busy seconds and GB/s are both rounded to 4 places: the rate lies within the
        # rates at the busy time's rounding bounds (a short busy time widens them)
        low, high = (e["bytes_read"] / (e["read_busy_s"] + d) / 1e9 for d in (5e-5, -5e-5))
        assert low - 5e-5 <= e["engine_gbps"] <= high + 5e-5
        assert e["ratio"] == pytest.approx(e["engine_gbps"] / r["raw_gbps"], rel=1e-3, abs=1e-4)
    assert read.text(r).startswith(f"(a) read: engine {r['engine_gbps']} GB/s while serving "
                                   f"misses ({r['reader']}) / store {r['raw_gbps']} GB/s raw")
    other = "kvikio" if r["reader"] == "threads" else "threads"
    assert read.text(r).endswith(f"; {other} {r['readers'][other]['engine_gbps']} "
                                 f"GB/s = {r['readers'][other]['ratio']}")
