"""Expert bytes damaged on disk, under or before a running engine: the error names the
expert and its shard, a file cut short is an error and never a signal, and once the file
is repaired, resume recovers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tuner.engine.session.session import Session
from tuner.engine.weights.checkpoint import Checkpoint

ROOT = Path(__file__).resolve().parents[2]  # the checkout, so its code is what runs
LAYER = 1  # every expert of this layer is damaged, so any token that reaches it fails


def damage(model, how):
    """Applies `how(bytes) -> bytes` to every expert of LAYER, in place."""
    ckpt = Checkpoint(model)
    for e in range(ckpt.config.num_experts):
        for ext in ckpt.extents(LAYER, e):
            with open(ext.path, "r+b") as f:
                f.seek(ext.offset)
                data = f.read(ext.length)
                f.seek(ext.offset)
                f.write(how(data))
    return os.path.basename(ckpt.extents(LAYER, 0)[0].path)


def all_ff(data: bytes) -> bytes:
    return b"\xff" * len(data)


def low_bit_flips(data: bytes) -> bytes:
    """The lowest mantissa bit of every float32: finite values, slightly different."""
    out = bytearray(data)
    for i in range(0, len(out), 4):
        out[i] ^= 1
    return bytes(out)


def run_until_error(session: Session, tokens: int = 200) -> str | None:
    session.start()
    session.wait_tokens(tokens, 60)
    return session.error


@pytest.mark.parametrize("verify", [0, 1])
def test_non_finite_experts_are_named_and_resume_recovers_after_repair(
        tiny_config, tiny_model, model_copy, verify):
    shard = damage(model_copy, all_ff)
    session = Session(replace(tiny_config, model=str(model_copy), verify_reads=verify))
    try:
        error = run_until_error(session)
        assert error is not None and session.state == "error"
        assert f"layer {LAYER}" in error and shard in error, error
        assert "not finite" in error
        if not verify:  # found after the fact, from the logits
            assert "verify_reads = 1" in error
        for name in os.listdir(tiny_model):  # repaired
            shutil.copy(tiny_model / name, model_copy / name)
        session.resume()  # on a rebuilt engine: its counters start again from zero
        assert session.wait_tokens(20, 60), session.error
        assert session.state == "running" and session.error is None
    finally:
        session.stop(timeout=10)


def test_bit_flips_are_caught_by_the_checksums(tiny_config, model_copy):
    """A flipped bit in a finite value passes the finite check; the CRC-32 recorded when
    the engine was built catches it at the next read."""
    session = Session(replace(tiny_config, model=str(model_copy), verify_reads=2))
    try:
        shard = damage(model_copy, low_bit_flips)  # after the build recorded the checksums
        error = run_until_error(session)
        assert error is not None and "CRC-32" in error and shard in error, error
    finally:
        session.stop(timeout=10)


def test_bit_flips_pass_without_checksums(tiny_config, model_copy):
    session = Session(replace(tiny_config, model=str(model_copy), verify_reads=1))
    try:
        damage(model_copy, low_bit_flips)
        assert run_until_error(session, 100) is None
    finally:
        session.stop(timeout=10)


CUT_SHORT = """
import json, os, sys, time
from tuner.engine.session.session import Session
from tuner.knobs import Config

model, shard = sys.argv[1], sys.argv[2]
session = Session(Config(model=model, expert_cache=4, io_workers=3, io_urgent=1))
session.start()
session.wait_tokens(5, 60)
os.truncate(os.path.join(model, shard), 1000)  # under the running engine
deadline = time.monotonic() + 60
while session.state != "error" and time.monotonic() < deadline:
    time.sleep(0.01)
print(json.dumps({"state": session.state, "error": session.error}))
session.stop(timeout=10)
"""


def test_a_shard_cut_short_under_a_running_engine_is_an_error_not_a_signal(model_copy):
    """In a process of its own: a SIGBUS would end it, which is what this checks for."""
    shard = sorted(p.name for p in model_copy.glob("*.safetensors"))[-1]
    out = subprocess.run([sys.executable, "-c", CUT_SHORT, str(model_copy), shard],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]  # -7 would be SIGBUS
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["state"] == "error" and shard in result["error"], result
    assert "truncated or replaced" in result["error"]
