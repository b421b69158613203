"""Every importer and loader of a file a user names, over generated files: raw bytes, and
lines built from each format's own fields with values of every JSON kind (integers past
64 bits, lone surrogates, nesting). Each reader either gives what the rest of tuner uses
or refuses the file with its own one-line error (a TunerError); nothing else escapes.
Small files and a bounded number of examples each, so the pass takes seconds."""

from __future__ import annotations

import csv
import io
import json
import struct
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tuner.engine.weights.checkpoint import read_header
from tuner.errors import TunerError
from tuner.presets import load_file
from tuner.presets.export import ImportProblems, import_env
from tuner.traces import budgets
from tuner.traces.importers import import_trace
from tuner.vocabulary import trace_format
from tuner.vocabulary.model_config import read_config
from tuner.vocabulary.trace_format import Trace
from tuner.vocabulary.workload import read_file

FUZZ = settings(max_examples=40, deadline=None)
TEXT = st.text(st.characters(exclude_categories=()), max_size=6)  # lone surrogates too
NUMBERS = st.integers(-2, 70) | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
SCALARS = st.none() | st.booleans() | NUMBERS | TEXT
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) |
                      st.dictionaries(TEXT, inner, max_size=3), max_leaves=10)
IDS = st.lists(st.integers(-2, 70) | st.integers(2**31, 2**70), max_size=6) | VALUES
BYTES = st.binary(max_size=300)


def refused_in_one_line(read: Callable[[], object]) -> object | None:
    """What `read()` gives, or None when it refused with a TunerError of one line."""
    try:
        return read()
    except TunerError as err:
        assert "\n" not in str(err).strip(), err
        return None


def written(name: str, data: bytes | str) -> Callable[[Callable[[Path], object]], object]:
    """Runs a reader on `data` written to a file `name` in a folder of its own."""
    def run(read: Callable[[Path], object]) -> object:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / name
            path.write_bytes(data if isinstance(data, bytes) else
                             data.encode("utf-8", "surrogatepass"))
            return refused_in_one_line(lambda: read(path))
    return run


def lines(objects: list, raw: list[bytes]) -> bytes:
    text = b"".join(json.dumps(o).encode() + b"\n" for o in objects)
    return text + b"\n".join(raw)


def imported(trace: object) -> None:
    if trace is not None:
        assert isinstance(trace, Trace)
        trace.check()


# -- route logs ---------------------------------------------------------------------------
ROWS = st.fixed_dictionaries(
    {"layer": st.integers(0, 3) | VALUES, "token_idx": st.integers(0, 5) | VALUES,
     "experts": IDS},
    optional={"problem_id": VALUES, "gating_probs": st.lists(NUMBERS, max_size=6) | VALUES,
              "dataset": VALUES, "extra": VALUES})


@FUZZ
@given(st.lists(ROWS, max_size=12), st.lists(BYTES, max_size=2))
def test_jsonl_route_logs(rows, raw):
    imported(written("log.jsonl", lines(rows, raw))(lambda p: import_trace("jsonl", p)))


VLLM = st.one_of(
    st.fixed_dictionaries({"type": st.just("meta")}, optional={
        "model_id": VALUES, "num_experts": st.integers(-2, 2**70) | VALUES,
        "top_k": VALUES}),
    st.fixed_dictionaries({"type": st.just("route") | TEXT, "req_id": st.integers(0, 3) |
                           VALUES, "token_idx": st.integers(0, 5) | VALUES,
                           "layer": st.integers(0, 2) | VALUES, "topk_ids": IDS},
                          optional={"topk_weights": st.lists(NUMBERS, max_size=6) | VALUES}))


@FUZZ
@given(st.lists(VLLM, max_size=16), st.lists(BYTES, max_size=2))
def test_vllm_route_logs(rows, raw):
    imported(written("moe_layer0.jsonl", lines(rows, raw))(lambda p: import_trace("vllm", p)))


CELLS = st.integers(-2, 70).map(str) | st.integers(2**31, 2**70).map(str) | \
    st.lists(st.integers(-2, 70), max_size=5).map(lambda ids: f"[{' '.join(map(str, ids))}]") \
    | TEXT
HEADERS = st.lists(st.sampled_from(["layer", "Layer ID", "token", "Token", "step", "experts",
                                    "Activated Expert IDs", "expert", "batch"]) | TEXT,
                   min_size=1, max_size=4)


@FUZZ
@given(HEADERS, st.lists(st.lists(CELLS, max_size=5), max_size=10), st.lists(BYTES, max_size=2))
def test_csv_route_logs(header, rows, raw):
    out = io.StringIO()
    csv.writer(out).writerows([header, *rows])
    data = out.getvalue().encode("utf-8", "surrogatepass") + b"\n".join(raw)
    imported(written("log.csv", data)(lambda p: import_trace("csv", p)))


# -- traces -------------------------------------------------------------------------------
ARRAYS = st.sampled_from([np.zeros((2, 2, 2), np.int32), np.arange(8).reshape(2, 2, 2),
                          np.full((1, 1, 2), -1, np.int16), np.zeros((2, 2), np.float32),
                          np.array(["x"]), np.zeros((2, 2, 64), np.float32)])


@FUZZ
@given(st.dictionaries(st.sampled_from(["experts", "meta", "logits", "probs", "stale", "x"]),
                       ARRAYS | VALUES.map(lambda v: np.array(json.dumps(v))), max_size=5),
       st.booleans(), BYTES)
def test_trace_files(arrays, as_zip, raw):
    out = io.BytesIO()
    if as_zip:
        with zipfile.ZipFile(out, "w") as z:
            for name, arr in arrays.items():
                member = io.BytesIO()
                np.save(member, arr)
                z.writestr(f"{name}.npy", member.getvalue())
    trace = written("t.npz", out.getvalue() if as_zip else raw)(trace_format.load)
    imported(trace)


# -- workloads, presets, env files, budgets -----------------------------------------------
TURNS = st.fixed_dictionaries({}, optional={"prompt": VALUES, "turns": VALUES,
                                            "max_tokens": st.integers(-2, 70000) | VALUES,
                                            "other": VALUES})


@FUZZ
@given(st.lists(TURNS | VALUES, max_size=6), st.lists(BYTES, max_size=2))
def test_workload_files(objects, raw):
    workload = written("w.jsonl", lines(objects, raw))(read_file)
    if workload is not None:
        assert all(isinstance(t.prompt, str) and t.prompt.encode()
                   for c in workload.conversations for t in c)


KNOB_LINES = st.sampled_from(["[knobs]", "[preset]", "moce_bonus = 0.5", "prefetch = \"stale\"",
                              'name = "x"', "moce_protect = true", "seed = " + "9" * 5000,
                              "a = [[[[[[[[1]]]]]]]]", "x = "]) | TEXT


@FUZZ
@given(st.lists(KNOB_LINES, max_size=6), BYTES)
def test_preset_files(lines_, raw):
    written("p.toml", "\n".join(lines_))(load_file)
    written("p.toml", raw)(load_file)


ENV_LINES = st.sampled_from(["STRATA_METAL_MOCE_BONUS=0.5", "export STRATA_PREFETCH='stale'",
                             "STRATA_PREFETCH_MAX=" + "9" * 5000, "# note", "NOPE=1", "x"]) | \
    TEXT


@FUZZ
@given(st.lists(ENV_LINES, max_size=6))
def test_env_files(env_lines):
    """An env file's problems are one line each, each naming the file's line."""
    try:
        import_env("\n".join(env_lines), "f.env")
    except ImportProblems as err:
        assert all(line.startswith("f.env") for line in str(err).splitlines()), err


@FUZZ
@given(VALUES | st.fixed_dictionaries({"quotas": VALUES}), BYTES)
def test_budgets_files(doc, raw):
    written("b.json", json.dumps(doc))(budgets.load)
    written("b.json", raw)(budgets.load)


# -- a model folder's JSON ----------------------------------------------------------------
@FUZZ
@given(VALUES, BYTES)
def test_config_json(doc, raw):
    for data in (json.dumps(doc), raw):
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "config.json").write_bytes(
                data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
            config = refused_in_one_line(lambda: read_config(Path(folder)))
            assert config is None or isinstance(config, dict)


TENSORS = st.dictionaries(TEXT, st.fixed_dictionaries(
    {"dtype": st.sampled_from(["F32", "BF16", "I8", "X"]) | VALUES,
     "shape": st.lists(st.integers(0, 4), max_size=3) | VALUES,
     "data_offsets": st.lists(st.integers(-1, 64), min_size=2, max_size=2) | VALUES}),
    max_size=3)


@FUZZ
@given(TENSORS | VALUES, st.integers(0, 2**64 - 1) | st.none(), st.integers(0, 128))
def test_safetensors_headers(header, claimed, data):
    text = json.dumps(header).encode("utf-8", "surrogatepass")
    size = len(text) if claimed is None else claimed
    written("model.safetensors", struct.pack("<Q", size) + text + bytes(data))(read_header)
