"""The CPU site's compute: beside a GPU from the experts' own bf16 bits (numba's kernel, or
torch without it), alone in float32 as the CPU computes every other expert."""

from __future__ import annotations

import threading

import pytest
import torch

from tuner.engine.memory.cpu_experts import CpuExperts
from tuner.engine.memory.host_copy import HostCopy
from tuner.engine.weights import bf16_rows
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.engine.weights.model import experts_out

KEYS = [(1, 5), (0, 0), (1, 2), (0, 7)]  # out of order, both layers


@pytest.fixture(scope="module")
def host(bf16_model) -> HostCopy:
    return HostCopy(Checkpoint(bf16_model))


def exact(host: HostCopy, x: torch.Tensor) -> torch.Tensor:
    """The experts in float32 from their bf16 weights (widened exactly)."""
    return experts_out(x.float(), host.gather(KEYS))


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b).norm() / b.norm()).item()


def x_for(host: HostCopy) -> torch.Tensor:
    d = host.layout.by_name["down"].shape[0]
    return torch.randn(d, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)


def test_beside_a_gpu_bf16_rows_are_read_in_place_with_float32_sums(host):
    pytest.importorskip("numba")
    site = CpuExperts(host, beside_gpu=True)
    assert site.kernel is not None and site.dtype == torch.float32 and "numba" in site.way
    x = x_for(host)
    out = site(x.to(site.dtype), KEYS).clone()  # the kernel's buffer: the next call's too
    assert out.shape == (len(KEYS), x.numel()) and out.dtype == torch.float32
    assert relative(out, exact(host, x)) < 1e-5  # float32 sums, only their order differs
    assert torch.equal(site(x.to(site.dtype), KEYS), out)  # the same bits every call
    # without the GIL: the link site's thread runs beside it, not after it
    assert bf16_rows._kernel().targetoptions["nogil"]


def test_without_numba_torch_computes_them_in_bf16(host, monkeypatch):
    monkeypatch.setattr(bf16_rows, "_kernel", lambda: None)
    site = CpuExperts(host, beside_gpu=True)
    assert site.kernel is None and site.dtype == torch.bfloat16
    assert site.way == "torch, bfloat16, an expert at a time"
    x = x_for(host)
    assert relative(site(x, KEYS), exact(host, x)) < 2e-2  # bf16 products round as they go


def test_alone_the_site_computes_as_the_cpu_computes_every_expert(host):
    site = CpuExperts(host, beside_gpu=False)
    assert site.kernel is None and site.dtype == torch.float32
    assert site.way == "torch, float32, widened batch"
    x = x_for(host).float()
    assert torch.equal(site(x, KEYS), exact(host, x))  # bit for bit: the site does not matter


def test_unquantized_float32_experts_are_never_narrowed(small_model):
    site = CpuExperts(HostCopy(Checkpoint(small_model)), beside_gpu=True)
    assert site.kernel is None and site.dtype == torch.float32


def test_two_sites_computing_at_once_take_turns(host):
    """numba's default thread layer aborts the process when two threads run a parallel
    kernel at once: two engines' CPU sites in one process take turns."""
    pytest.importorskip("numba")
    sites = [CpuExperts(host, beside_gpu=True) for _ in range(2)]
    x = x_for(host).float()
    want = sites[0](x, KEYS).clone()
    outs: list[torch.Tensor] = []

    def work(site: CpuExperts) -> None:
        outs.extend(site(x, KEYS).clone() for _ in range(20))

    threads = [threading.Thread(target=work, args=(s,)) for s in sites]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(outs) == 40 and all(torch.equal(o, want) for o in outs)


def test_the_kernel_takes_only_shapes_its_pairs_and_fours_divide(host):
    """It reads bf16s in pairs and computes four rows at once: a layout it cannot divide
    goes to torch instead of being read past its rows."""
    pytest.importorskip("numba")
    from dataclasses import replace

    layout = host.layout
    assert bf16_rows.load(host.mem, layout) is not None
    down = layout.by_name["down"]
    odd = tuple(replace(p, shape=(p.shape[0], p.shape[1] - 1)) if p is down else p
                for p in layout.parts)
    assert bf16_rows.load(host.mem, replace(layout, parts=odd)) is None


def test_its_outputs_are_page_locked_beside_a_gpu_only(host):
    pytest.importorskip("numba")
    kernel = bf16_rows.load(host.mem, host.layout)
    assert kernel is not None
    out = kernel([0, 1], x_for(host).float())
    assert out.is_pinned() == host.mem.is_pinned()
    assert kernel([2], x_for(host).float()).data_ptr() == out.data_ptr()  # one buffer
