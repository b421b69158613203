"""Group-wise int8 / int4 experts: the documented layout, the quantize command, and the
engine streaming the packed bytes."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from dataclasses import replace

import pytest
import torch

from tuner.engine.step.decode import Engine
from tuner.engine.step.reference import Resident
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.engine.weights.quant import Quant, dequantize, quantize


def test_int4_layout_packs_each_group_in_two_halves():
    """Within a group, byte j holds weight j (low nibble) and weight j + group/2 (high),
    each as q + 8; one float16 scale per group."""
    q = Quant(4, 32)
    ints = torch.arange(64).remainder(15) - 7  # -7..7, two groups of a row
    scales = torch.tensor([0.5, 2.0])
    w = (ints.view(2, 32) * scales[:, None]).view(1, 64)
    packed, s = quantize(w, q)
    assert packed.shape == (1, 32) and packed.dtype == torch.uint8
    assert s.dtype == torch.float16 and s.tolist() == [[0.5, 2.0]]
    for group in range(2):
        for j in range(16):
            byte = int(packed[0, group * 16 + j])
            assert byte & 15 == ints[group * 32 + j] + 8
            assert byte >> 4 == ints[group * 32 + 16 + j] + 8
    assert torch.equal(dequantize(packed[None], s[None], q, torch.float32)[0], w)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("group", [32, 64, 128])
def test_each_weight_is_within_half_a_step_of_its_group(bits, group):
    q = Quant(bits, group)
    w = torch.randn(24, 256, generator=torch.Generator().manual_seed(bits + group))
    packed, s = quantize(w, q)
    back = dequantize(packed[None], s[None], q, torch.float32)[0]
    step = s.float().repeat_interleave(group, dim=1)
    assert ((back - w).abs() <= step / 2 + 1e-3 * step).all()


def test_bad_bits_and_groups_are_named():
    with pytest.raises(ValueError, match="bits = 3: allowed 8, 4"):
        Quant(3, 64)
    with pytest.raises(ValueError, match="group = 48: allowed 32, 64, 128"):
        Quant(4, 48)
    with pytest.raises(ValueError, match="does not split into groups of 64"):
        quantize(torch.zeros(4, 96), Quant(4, 64))


@pytest.fixture(scope="module")
def quantized_run(tiny_model, tmp_path_factory):
    """(folder, the command's JSON report) of `tuner model quantize` on the tiny model."""
    from tuner.cli import main

    out = tmp_path_factory.mktemp("quant") / "tiny-int4"
    printed = io.StringIO()
    with redirect_stdout(printed):
        assert main(["model", "quantize", str(tiny_model), str(out), "--bits", "4",
                     "--group", "32", "--tokens", "16", "--device", "cpu", "--json"]) == 0
    return out, json.loads(printed.getvalue())


@pytest.fixture
def int4_model(quantized_run):
    return quantized_run[0]


def test_quantize_writes_packed_experts_and_reports_quality(quantized_run, tiny_model):
    int4_model, report = quantized_run
    source, quantized = Checkpoint(tiny_model), Checkpoint(int4_model)
    assert quantized.quant == Quant(4, 32) and quantized.dtype == torch.float32
    assert quantized.name == "strata-tiny-4x16-v2-int4g32"
    # 4 bits a weight plus a float16 scale per 32: 4.5 bits against float32's 32
    assert quantized.expert_bytes == source.expert_bytes * 4.5 / 32
    config = json.loads((int4_model / "config.json").read_text())
    assert config["quantization_config"] == {"quant_method": "tuner-groupwise", "bits": 4,
                                             "group_size": 32, "scale_dtype": "float16"}
    assert report["bytes_ratio"] == round(32 / 4.5, 3)
    quality = report["quality"]
    assert quality["positions"] == 8 + 16 - 1 and quality["greedy_tokens"] == 16
    assert 0 <= quality["mean_kl"] <= quality["max_kl"]
    assert 0 <= quality["top1_agreement_pct"] <= 100
    assert 0 <= quality["greedy_same_prefix"] <= 16


def test_quantize_refuses_a_quantized_source(int4_model, tmp_path, refuses):

    refuses(["model", "quantize", str(int4_model), str(tmp_path / "again")], "already quantized")


def test_the_engine_streams_packed_bytes_and_matches_the_resident_model(int4_model,
                                                                        tiny_config):
    ckpt = Checkpoint(int4_model)
    cfg = replace(tiny_config, model=str(int4_model), expert_cache=8, prefetch="stale")
    engine = Engine(ckpt, cfg, torch.device("cpu"))
    resident = Resident(ckpt, cfg.context, torch.device("cpu"))
    token = 7
    try:
        for pos in range(30):
            a, b = engine.step(token, pos), resident.step(token, pos)
            assert torch.equal(a, b), f"logits differ at step {pos}"
            token = int(torch.argmax(a))
        engine.drain()
        counts, _, _ = engine.counters.read(False)
    finally:
        engine.close()
    from tuner.vocabulary.counters import IDX

    misses = counts[:, IDX["sync_misses"]].sum()
    assert misses > 0
    assert counts[:, IDX["bytes_demand"]].sum() == misses * ckpt.expert_bytes
