"""A model folder that cannot be built, set through PATCH {"model": DIR}: whatever building
it raises, the PATCH answers 422 with the reason as soon as the engine tried, the running
engine keeps decoding, and the next change applies at once."""

from __future__ import annotations

import json
import shutil
import time

import httpx
import pytest

from tuner.engine.weights.checkpoint import Checkpoint

BROKEN_CONFIGS = {
    "a-list": lambda cfg: [],
    "zero-heads": lambda cfg: {k: v for k, v in cfg.items() if k != "head_dim"}
    | {"num_attention_heads": 0},
    "no-experts": lambda cfg: {k: v for k, v in cfg.items() if k != "num_experts"},
    "no-vocab": lambda cfg: {k: v for k, v in cfg.items() if k != "vocab_size"},
    "string-layers": lambda cfg: {**cfg, "num_hidden_layers": "four"},
    "negative-head-dim": lambda cfg: {**cfg, "head_dim": -1},
    "kv-heads-not-a-divisor": lambda cfg: {**cfg, "num_key_value_heads": 3},
    # Two key-value heads divide two query heads, but the weights hold one: the stored k/v
    # projections' shapes are checked against config.json at load.
    "kv-heads-mismatch": lambda cfg: {**cfg, "num_key_value_heads": 2},
}


def nan_final_norm(folder):
    """The final norm's weights overwritten with NaN: every shape and size checks out, the
    first token's logits are NaN."""
    path, offset, length, *_ = Checkpoint(folder)._where["model.norm.weight"]
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(b"\xff" * length)


BUILDS_BUT_FAILS = {"nan-final-norm": nan_final_norm}



@pytest.fixture
def broken_model(tiny_model, tmp_path, request):
    folder = tmp_path / request.param
    shutil.copytree(tiny_model, folder)
    if request.param in BUILDS_BUT_FAILS:
        BUILDS_BUT_FAILS[request.param](folder)
        return folder
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(BROKEN_CONFIGS[request.param](cfg)))
    return folder


@pytest.mark.parametrize("broken_model", list(BROKEN_CONFIGS), indirect=True)
def test_a_model_that_cannot_be_built_is_refused_and_the_engine_runs_on(live, broken_model):
    before = live.controller.state()
    r = httpx.patch(f"{live.url}/api/settings", json={"model": str(broken_model)}, timeout=60)
    assert r.status_code == 422, r.text
    problems = r.json()["detail"]["problems"]
    if "model" in problems:  # a config that describes no model: refused before the engine
        assert "is not a model folder" in problems["model"] and "config.json" in problems["model"]
    else:  # one the engine could not build
        reason = problems["settings"]
        assert "refused by the engine" in reason and "kept the previous settings" in reason
        assert live.session.snapshot()["changes"][-1]["rejected"]  # in the change log
    assert live.controller.state() == before  # version and settings as they were
    snap = live.session.snapshot()
    assert snap["state"] == "running" and snap["pending_version"] is None
    live.wait_tokens(3)  # the engine decodes on

    r = httpx.patch(f"{live.url}/api/settings", json={"moce_bonus": 0.5}, timeout=60)
    assert r.status_code == 200 and r.json()["settings"]["moce_bonus"] == 0.5
    assert live.session.snapshot()["settings"]["moce_bonus"] == 0.5


@pytest.mark.parametrize("broken_model", list(BUILDS_BUT_FAILS), indirect=True)
def test_a_model_that_builds_but_cannot_decode_stops_with_a_reason_and_recovers(
        live, broken_model):
    """Dense weights of NaN: the engine builds, the first token's logits are NaN. The
    session stops in the error state with the reason; switching back and resuming
    recovers."""
    good = live.controller.settings.model
    r = httpx.patch(f"{live.url}/api/settings", json={"model": str(broken_model)}, timeout=60)
    assert r.status_code == 200
    deadline = time.monotonic() + 30
    while live.session.state != "error":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert "not finite" in live.session.snapshot()["error"]
    r = httpx.patch(f"{live.url}/api/settings", json={"model": good}, timeout=60)
    assert r.status_code == 200 and r.json()["state"] == "error"  # applied, still stopped
    assert httpx.post(f"{live.url}/api/session/resume").json() == {"state": "running"}
    live.wait_tokens(3)
    assert live.session.state == "running"
