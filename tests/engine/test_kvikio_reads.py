"""The KvikIO reader against the reader threads: the same bytes from a checkpoint, and the
engine's same tokens and residency counts with either (read timing never leaks into
residency). On the library where it reads (a GPU machine), and on the stand-in for it
(kvikio_standin.py) everywhere."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tests.engine.kvikio_standin import installed, needs_kvikio
from tuner.engine.memory.store import make_reads, reader_for
from tuner.engine.session.session import Session
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config

KVIKIO = [pytest.param("standin"), pytest.param("library", marks=needs_kvikio)]


@pytest.fixture(params=KVIKIO)
def kvikio(request, monkeypatch):
    """Where `import kvikio` leads: the stand-in, or the library."""
    if request.param == "standin":
        with installed(monkeypatch):
            yield request.param
    else:
        yield request.param


def read_all(ckpt: Checkpoint, reader: str, direct: bool) -> torch.Tensor:
    mc = ckpt.config
    keys = [(l, e) for l in range(mc.num_layers) for e in range(mc.num_experts)]
    rows = torch.zeros(len(keys), ckpt.row_bytes, dtype=torch.uint8)
    pool = make_reads(reader, 3, 1, direct, 16 << 10)  # several pieces per expert
    try:
        reads = [pool.submit(k, ckpt.extents(*k), rows[i].numpy().data, i % 2 == 0)
                 for i, k in enumerate(keys)]
        for read in reads:
            pool.wait(read)
    finally:
        pool.close()
    return rows


@pytest.mark.parametrize("direct", [False, True])
def test_kvikio_reads_the_bytes_the_threads_read(kvikio, small_model, direct):
    ckpt = Checkpoint(small_model)
    threads = read_all(ckpt, "threads", direct)
    assert torch.equal(read_all(ckpt, "kvikio", direct), threads)
    assert torch.equal(threads[-1], ckpt.expert_tensor(2, 7))


def decode(cfg: Config, tokens: int = 120) -> tuple[dict, str]:
    s = Session(cfg)
    try:
        s.run(tokens)
        return s.snapshot(), s.engine.pool.name
    finally:
        s.engine.close()


def counts(snap: dict) -> list[tuple]:
    keys = ("lookups", "hits", "sync_misses", "pf_issued", "evictions", "resident")
    return [tuple(row[k] for k in keys) for row in snap["layers"]]


@pytest.mark.parametrize("changes", [
    {"prefetch": "stale", "prefetch_max": 0},
    {"prefetch": "stale", "io_jitter_ms": 2.0, "ssd_gbps": 2.0, "verify_reads": 2,
     "io_direct": True},
])
def test_the_engine_decodes_the_same_with_either_reader(kvikio, tiny_config, changes):
    cfg = replace(tiny_config, **changes)
    threads, name = decode(replace(cfg, io_reader="threads"))
    assert name == "threads"
    other, name = decode(replace(cfg, io_reader="kvikio"))
    assert name == "kvikio"
    assert other["output_hash"] == threads["output_hash"]
    assert counts(other) == counts(threads)
    for a, b in zip(threads["layers"], other["layers"]):
        assert a["pf_late"] + a["pf_timely"] == b["pf_late"] + b["pf_timely"]


def test_auto_takes_kvikio_only_on_a_cuda_device(kvikio, tiny_config):
    """Where KvikIO reads, auto takes it for an engine on a CUDA device and the reader
    threads for one on the CPU (a CPU engine's misses are copies in RAM: no link to feed)."""
    assert decode(replace(tiny_config, device="cpu"), 8)[1] == "threads"
    assert reader_for("auto", torch.device("cuda")) == "kvikio"
    assert reader_for("auto", torch.device("cpu")) == "threads"
