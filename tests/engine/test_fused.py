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
from dataclasses import replace

import pytest
import torch

from tuner.engine.weights import synth

pytest.importorskip("triton", reason="the fused kernels need Triton (CUDA builds of torch)")

def run_checked(script: str, *args: str) -> None:
    """Runs a check script with the device as its first argument: CUDA where there is
    one, else the CPU through Triton's interpreter; it prints "ok" when every check held."""
    cuda = torch.cuda.is_available()
    env = dict(os.environ) if cuda else dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", script, "cuda" if cuda else "cpu", *args],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok")


CHECK = textwrap.dedent('''
    import sys, torch
    from tuner.engine.weights import fused
    from tuner.engine.weights.checkpoint import Checkpoint
    from tuner.engine.weights.model import experts_out
    device = sys.argv[1]
    layout = Checkpoint(sys.argv[2]).layout
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
    # rows wider than one pass of its programs, copied after `first`
    words = 2 * fused.COPY_PROGRAMS * fused.COPY_BLOCK + 37
    wide = torch.randint(0, 256, (3, 4 * words), dtype=torch.uint8)
    wide = wide.pin_memory() if device == "cuda" else wide
    dst = torch.zeros(4, 4 * words, dtype=torch.uint8, device=device)
    fused.copy_rows(dst, 1, wide, torch.tensor([2, -1, 0], device=device))
    assert not dst[0].any() and not dst[2].any()
    assert torch.equal(dst[1].cpu(), wide[2]) and torch.equal(dst[3].cpu(), wide[0])
    print("ok", err)
''')


@pytest.mark.parametrize("model, tolerance", [("tiny_model", 1e-5), ("small_model", 1e-5)])
def test_the_fused_kernels_compute_what_the_batched_products_do(model, tolerance, request):
    folder = request.getfixturevalue(model)
    run_checked(CHECK, str(folder), str(tolerance))


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
    run_checked(CHOOSE)


PREPARE = textwrap.dedent('''
    import dataclasses, sys, torch
    from tuner.engine.weights.checkpoint import Checkpoint
    from tuner.engine.weights.model import Decoder
    device, folder = torch.device(sys.argv[1]), sys.argv[2]
    g = torch.Generator().manual_seed(2)
    cases = 0
    for arch, dtype, clip in (("qwen3_moe", "bf16", None), ("olmoe", "bf16", None),
                              ("olmoe", "bf16", 0.05), ("mixtral", "fp32", 0.05),
                              ("qwen3_moe", "fp32", None)):
        ckpt = Checkpoint(f"{folder}/{arch}-{dtype}")
        mc = dataclasses.replace(ckpt.config, clip_qkv=clip)
        dt = ckpt.dtype
        decs = [Decoder(mc, ckpt.dense(), 300, device, dt) for _ in range(2)]
        torch_path, kernel = decs
        torch_path.one_kernel, kernel.one_kernel = False, True
        for layer in range(mc.num_layers):  # norm weights of every value, head by head
            p = [d.layers[layer] for d in decs]
            for name in ("q_norm", "k_norm", "qk_norm"):
                if getattr(p[0], name) is not None:
                    w = torch.rand(getattr(p[0], name).shape, generator=g) + 0.5
                    for q in p:
                        getattr(q, name).copy_(w)
        for pos in (0, 1, 7, 255, 256, 299):
            h = torch.randn(mc.hidden_size, generator=g).to(device, dt)
            span = kernel.span(pos)
            at = torch.tensor([pos], device=device)
            want = torch_path.attend_one(1, h, at, span)
            out = torch.empty_like(h)
            got = kernel.attend_one(1, h, at, span, out=out)
            assert got is out
            tol = dict(rtol=2e-2, atol=2e-2) if dt != torch.float32 else dict(rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(got, want, **tol)
            for cache in ("k_cache", "v_cache"):
                a, b = getattr(kernel, cache)[1, :, pos], getattr(torch_path, cache)[1, :, pos]
                torch.testing.assert_close(a, b, **tol)
                assert a.abs().sum() > 0
            seen = kernel.seen[:span].bool()
            assert torch.equal(seen, torch.arange(span, device=device) <= pos)
            cases += 1
    print("ok", cases)
''')


def test_one_kernel_readies_a_tokens_q_k_and_v_as_the_torch_path_does(tmp_path):
    """token_qkv.prepare (norms over a head or the whole projection, clip_qkv, the rotary
    embedding, the cache writes and the mask) against the torch operations it stands for,
    norm weights random per value so a misplaced weight shows."""
    for arch, dtype in (("qwen3_moe", "bf16"), ("olmoe", "bf16"), ("mixtral", "fp32"),
                        ("qwen3_moe", "fp32")):  # made here: routing them would interpret
        synth.write(replace(synth.TINY, name=f"t-{arch}-{dtype}", arch=arch, dtype=dtype),
                    tmp_path / f"{arch}-{dtype}")
    run_checked(PREPARE, str(tmp_path))


ROUTER = textwrap.dedent('''
    import sys, torch
    from tuner.engine.step.device_step import ahead_rows
    from tuner.engine.weights import router_kernels
    device = sys.argv[1]
    g = torch.Generator().manual_seed(3)
    spec_rows = 0  # misses found read ahead, over the cases
    for E, D, k in ((8, 64, 2), (64, 256, 6), (128, 2048, 8), (7, 100, 4)):
        routers = torch.randn(2, E, D, generator=g).to(device)
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(D, generator=g).to(device, dtype)
            got = router_kernels.logits(routers[0], x)
            torch.testing.assert_close(got, routers[0] @ x.float(), rtol=1e-5, atol=1e-4)
            assert torch.equal(router_kernels.top_k(got, k), torch.topk(got, k).indices)
            # two layers' routers at once give each layer's logits bit for bit
            both = router_kernels.logits(routers.view(2 * E, D), x)
            assert torch.equal(both[:E], got)
            assert torch.equal(both[E:], router_kernels.logits(routers[1], x))
            # a layer's route in one kernel: the same ids, their rows, the weights of
            # `weights` bit for bit (as torch's, to rounding), the pack
            table = torch.where(torch.rand(E, generator=g) < 0.5, torch.arange(E) + 100,
                                -1).to(device)
            for normalise in (True, False):
                w, pack = torch.zeros(k, device=device), torch.zeros(2 * k, device=device)
                sel, rows = router_kernels.route(got, table, k, normalise, w, pack)
                assert torch.equal(sel, torch.topk(got, k).indices)
                assert torch.equal(rows, table[sel])
                assert torch.equal(pack, torch.cat([sel, rows]).float())
                assert torch.equal(w, router_kernels.weights(got, sel, normalise))
                want = got[sel].softmax(0) if normalise else got.softmax(0)[sel]
                torch.testing.assert_close(w, want, rtol=1e-5, atol=1e-7)
            # with a read-ahead set: the missing experts it names (as this layer's far
            # rows, some more than once, some of another layer) at their speculation rows,
            # as device_step.ahead_rows finds them, and the set in the pack
            base, first = 3 * E, 1000
            picked = torch.topk(got, k).indices.cpu()
            src = torch.cat([picked[torch.randperm(k, generator=g)[:k // 2 + 1]] + base,
                             torch.tensor([-1, picked[0] + 2 * E])])[:k]
            src = torch.cat([src, torch.full((k - len(src),), -1)])
            if k > 2:
                src[-1] = src[0]
            src = src.to(device)
            w, pack = torch.zeros(k, device=device), torch.zeros(2 * k, device=device)
            named = torch.zeros(k, device=device)
            sel, rows = router_kernels.route(got, table, k, True, w, pack,
                                             (src, first, base, named))
            want = ahead_rows(table[sel], sel + base, src, first)
            assert torch.equal(rows, want), (rows, want)
            assert torch.equal(pack, torch.cat([sel, want]).float())
            assert torch.equal(named, src.float())
            spec_rows += int((want >= first).sum())
    # ties go to the lower id, and ids stay distinct where the rest are -inf
    s = torch.tensor([1.0, 3.0, 3.0, float("-inf"), float("-inf")], device=device)
    assert router_kernels.top_k(s, 4).tolist() == [1, 2, 0, 3]
    assert spec_rows > 0
    print("ok")
''')


def test_one_tokens_router_kernels_give_torchs_logits_top_k_and_weights():
    """router_kernels (a token's router logits, top k, weights and a layer's route on CUDA)
    against torch's product, torch.topk and softmax, from float32 and 16-bit inputs."""
    run_checked(ROUTER)
