"""Files a user names that lie or overflow: a model config.json describing a model no
machine holds, a trace whose headers claim more than is stored, JSON nested beyond what a
parser can recurse. Each is one line naming the field and what is allowed, before anything
is allocated from it; never a traceback, a MemoryError or a process that grows first."""

from __future__ import annotations

import io
import json
import shutil
import zipfile

import httpx
import numpy as np
import pytest
from numpy.lib import format as npy

from tuner.cli import main
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.vocabulary import trace_format
from tuner.vocabulary.model_config import ModelError
from tuner.vocabulary.trace_format import Trace, TraceError
from tuner.vocabulary.workload import WorkloadError, read_file

NESTED = "[" * 100_000

def spoiled(tiny_model, tmp_path, name: str, text: str):
    folder = tmp_path / name
    shutil.copytree(tiny_model, folder)
    (folder / "config.json").write_text(text)
    return folder


# Configs over a size limit, by every command, are in tests/engine/test_model_errors.py.
@pytest.mark.parametrize("key, value, message", [
    ("num_key_value_heads", 3, "num_attention_heads = 2 is not a multiple of "
                               "num_key_value_heads = 3"),
    ("rope_theta", "fast", "rope_theta = 'fast': it must be a number > 0"),
    ("head_dim", 0, "head_dim = 0: it must be a whole number from 1 to 1,024"),
])
def test_sizes_that_cannot_build_a_model_are_refused(tiny_model, tmp_path, key, value,
                                                     message):
    config = json.loads((tiny_model / "config.json").read_text())
    folder = spoiled(tiny_model, tmp_path, key, json.dumps({**config, key: value}))
    with pytest.raises(ModelError) as err:
        Checkpoint(folder)
    assert str(err.value).startswith(f"{folder / 'config.json'}: {message}")


def test_a_config_whose_dense_weights_exceed_the_machine_is_refused(tiny_model, tmp_path):
    config = json.loads((tiny_model / "config.json").read_text())
    folder = spoiled(tiny_model, tmp_path, "huge", json.dumps(
        {**config, "vocab_size": 2**21, "hidden_size": 2**16}))
    with pytest.raises(ModelError, match=r"512\.1 GiB of dense weights .* this machine has"):
        Checkpoint(folder)


def test_a_config_that_disagrees_with_its_weights_is_refused(tiny_model, tmp_path):
    config = json.loads((tiny_model / "config.json").read_text())
    folder = spoiled(tiny_model, tmp_path, "vocab", json.dumps(
        {**config, "vocab_size": config["vocab_size"] + 1}))
    with pytest.raises(ModelError, match=r"tensor model.embed_tokens.weight has shape "
                                         r"\[256, 64\]; config.json's sizes make it \[257, 64\]"):
        Checkpoint(folder)


def test_json_nested_past_the_parser_is_a_malformed_file(tiny_model, tmp_path):
    folder = spoiled(tiny_model, tmp_path, "nested", NESTED)
    with pytest.raises(ModelError, match="is not readable JSON .*nested too deeply"):
        Checkpoint(folder)
    workload = tmp_path / "nested.jsonl"
    workload.write_text(NESTED + "\n")
    with pytest.raises(WorkloadError, match="line 1: not JSON .*nested too deeply"):
        read_file(workload)


def npz(path, arrays: dict, claims: dict | None = None):
    """An .npz of `arrays`, where `claims` replaces an array's header shape by a lie."""
    with zipfile.ZipFile(path, "w") as z:
        for name, arr in arrays.items():
            out = io.BytesIO()
            header = npy.header_data_from_array_1_0(arr)
            header["shape"] = (claims or {}).get(name, arr.shape)
            npy.write_array_header_1_0(out, header)
            out.write(arr.tobytes())
            z.writestr(f"{name}.npy", out.getvalue())
    return path


def trace_arrays(tokens: int = 4, **meta) -> dict:
    experts = np.tile(np.array([0, 1], dtype=np.int32), (tokens, 2, 1))  # [T, 2 layers, k 2]
    return {"experts": experts, "meta": np.array(json.dumps({"num_experts": 4, **meta}))}


@pytest.mark.parametrize("case, arrays, claims, message", [
    ("tokens", trace_arrays(), {"experts": (2**48, 2, 2)},
     "array 'experts': its header says int32 of shape (281474976710656, 2, 2), "
     "4,503,599,627,370,496 bytes; 64 are stored"),
    ("experts", trace_arrays(num_experts=10**12), None,
     "meta 'num_experts' must be an integer from 1 to 65,536, got 1000000000000"),
    ("bytes", trace_arrays(expert_bytes=-1), None,
     "meta 'expert_bytes' must be an integer >= 0 (0: not known), got -1"),
    ("empty", trace_arrays(tokens=0), None,
     "'experts' has shape (0, 2, 2); a trace holds at least one token"),
])
def test_a_trace_header_that_lies_is_one_line(tmp_path, capsys, case, arrays, claims,
                                             message):
    path = npz(tmp_path / f"{case}.npz", arrays, claims)
    with pytest.raises(TraceError) as err:
        trace_format.load(path)
    assert message in str(err.value)
    for command in (["trace", "stats", str(path)], ["replay", str(path), "--slots", "2"]):
        assert main(command) == 2
        printed = capsys.readouterr().err
        assert message in printed and printed.count("\n") == 1


def test_a_truthful_handmade_trace_loads(tmp_path):
    trace = trace_format.load(npz(tmp_path / "fine.npz", trace_arrays()))
    assert isinstance(trace, Trace) and trace.tokens == 4 and trace.num_experts == 4


def test_a_trace_without_tokens_is_refused_as_routing_and_the_engine_runs_on(live, tmp_path):
    empty = npz(tmp_path / "empty.npz", trace_arrays(tokens=0))
    r = httpx.patch(f"{live.url}/api/settings", json={"routing": str(empty)}, timeout=60)
    assert r.status_code == 422
    message = r.json()["detail"]["problems"]["routing"]
    assert message.startswith("routing (STRATA_ROUTING) = ") and "at least one token" in message
    live.wait_tokens(3)
    assert live.session.state == "running" and live.controller.settings.routing == ""
