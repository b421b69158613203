"""The fused expert kernels (fused.py) against the batched products they replace on CUDA:
the same function of the rows they name, bit-stable and independent of the batch around an
expert. Runs on CUDA, or on the CPU through Triton's interpreter in a subprocess (the
interpreter must be chosen before Triton is imported); Triton comes with CUDA builds of
torch, so a CPU-only install skips these."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytest.importorskip("triton", reason="the fused kernels need Triton (CUDA builds of torch)")

CHECK = textwrap.dedent('''
    import sys, torch
    from tuner.engine.weights import fused
    from tuner.engine.weights.checkpoint import Checkpoint
    from tuner.engine.weights.model import experts_out
    device = sys.argv[2]
    layout = Checkpoint(sys.argv[1]).layout
    g = torch.Generator().manual_seed(0)
    R, k = 12, layout.by_name["gate"].shape and 4
    mem = torch.zeros(R, layout.row_bytes, dtype=torch.uint8)
    for p in layout.parts:  # random weights, the padding left zero as in an arena
        vals = (torch.randn(R, *p.shape, generator=g) * 0.2).to(p.dtype)
        mem[:, p.offset:p.offset + p.nbytes] = vals.view(R, -1).view(torch.uint8)
    mem = mem.to(device)
    D = layout.by_name["down"].shape[0]
    x = torch.randn(D, generator=g).to(device, layout.by_name["gate"].dtype)
    w = torch.softmax(torch.randn(k, generator=g), 0).to(device)
    rows = torch.tensor([7, 2, 11, 2], device=device)
    y = fused.mix(mem, rows, layout, x, w)
    ref = (w.double() @ experts_out(x.double(), layout.weights(mem[rows]).__class__(
        *(t.double() for t in layout.weights(mem[rows]).matrices(x.dtype))))).to(y.dtype)
    err = ((y.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < float(sys.argv[3]), err
    assert torch.equal(fused.mix(mem, rows, layout, x, w), y)  # the same bits again
    # an expert's share does not depend on the others in the batch
    alone = fused.mix(mem, rows[2:3], layout, x, torch.ones(1, device=device))
    pair = fused.mix(mem, rows[1:3], layout, x, torch.tensor([0.0, 1.0], device=device))
    assert torch.equal(alone, pair), (alone - pair).abs().max()
    # a negative row reads the expert far away (page-locked host memory on CUDA), the same
    # bits as near, and lands its bytes; a near row lands nothing
    far_mem = mem.cpu().pin_memory() if device == "cuda" else mem.clone()
    land = torch.zeros(4, layout.row_bytes, dtype=torch.uint8, device=device)
    far = fused.Far(far_mem, torch.tensor([0, 2, 0, 5], device=device), land, len(mem))
    got = fused.mix(mem, torch.tensor([7, -1, 11, -1], device=device), layout, x, w, far)
    assert torch.equal(got, fused.mix(mem, torch.tensor([7, 2, 11, 5], device=device),
                                      layout, x, w))
    assert torch.equal(land[1], mem[2]) and torch.equal(land[3], mem[5])
    assert not land[0].any() and not land[2].any()
    # near rows from land_from on (speculation's) land as far ones do
    land.zero_()
    far = fused.Far(far_mem, torch.tensor([0, 2, 0, 5], device=device), land, 11)
    got = fused.mix(mem, torch.tensor([7, -1, 11, -1], device=device), layout, x, w, far)
    assert torch.equal(land[2], mem[11]) and torch.equal(land[1], mem[2])
    assert not land[0].any()
    # copy_rows reads the rows it names from far memory and skips -1, in one kernel
    dst = torch.zeros(3, layout.row_bytes, dtype=torch.uint8, device=device)
    fused.copy_rows(dst, 0, far_mem, torch.tensor([4, -1, 9], device=device))
    assert torch.equal(dst[0], mem[4]) and not dst[1].any() and torch.equal(dst[2], mem[9])
    print("ok", err)
''')


@pytest.mark.parametrize("model, tolerance", [("tiny_model", 1e-5), ("small_model", 1e-5)])
def test_the_fused_kernels_compute_what_the_batched_products_do(model, tolerance, request):
    folder = request.getfixturevalue(model)
    cuda = torch.cuda.is_available()
    env = dict(os.environ) if cuda else dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", CHECK, str(folder), "cuda" if cuda else "cpu",
                           str(tolerance)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok")


CHOOSE = textwrap.dedent('''
    import itertools, sys, torch
    from tuner.engine.weights import fused
    from tuner.engine.step.device_step import choose
    device = sys.argv[1]
    g = torch.Generator().manual_seed(1)
    cases = 0
    for E, k in ((16, 4), (64, 6), (128, 8)):
        for trial, given, ok, drop, limit in itertools.product(
                range(6), (False, True), (None, True, False), (0.0, 0.1, 0.3), (1, 2, k)):
            scores = torch.randn(E, generator=g).to(device)
            table = torch.where(torch.rand(E, generator=g) < 0.5, 3, -1).to(device)
            pred = torch.randperm(E, generator=g)[:k].to(device) if given else None
            okt = None if ok is None else torch.tensor([ok], device=device)
            want = choose(scores, pred, okt, table, k, limit, drop)
            ids = torch.full((k,), 7, dtype=torch.int64, device=device)
            src = torch.full((k,), 7, dtype=torch.int64, device=device)
            fused.choose_ahead(scores, pred, okt, table, ids, src, limit, drop, 1000)
            assert torch.equal(ids, want), (E, k, given, ok, drop, limit, ids, want)
            assert torch.equal(src, torch.where(want >= 0, want + 1000, -1))
            cases += 1
    print("ok", cases)
''')


def test_choosing_what_to_read_ahead_in_one_kernel_follows_the_torch_rule():
    """fused.choose_ahead (what a layer's graph reads ahead for the next layer) picks what
    device_step.choose picks, over predictors given or taken as the top k, residency,
    `ok`, drop_cold and limits."""
    cuda = torch.cuda.is_available()
    env = dict(os.environ) if cuda else dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", CHOOSE, "cuda" if cuda else "cpu"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok")
