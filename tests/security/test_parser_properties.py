"""Properties of the parsers of what comes in from outside, over generated input: a model's
config.json, a trace's array headers and meta, and a websocket or REST message. Each
either accepts its input into something the rest of tuner can use, or refuses it with its
own one-line error; no input makes it raise anything else."""

from __future__ import annotations

import asyncio
import io
import json
import math
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import orjson
import pytest
import websockets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib import format as npy

from tuner.engine.weights import synth
from tuner.knobs import KNOBS
from tuner.vocabulary import trace_format
from tuner.vocabulary.model_config import LIMITS, MAX_PAIRS, ModelConfig, ModelError
from tuner.vocabulary.trace_format import TraceError
from tuner.web.limits import MAX_DEPTH, depth, json_problem

# Any character, lone surrogates included: JSON's escapes can spell them.
TEXT = st.text(st.characters(exclude_categories=()), max_size=6)
SCALARS = st.none() | st.booleans() | st.integers(-2**70, 2**70) | \
    st.floats(allow_nan=False, allow_infinity=False) | TEXT
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    TEXT, inner, max_size=3), max_leaves=12)


def nested(value, levels: int):
    for _ in range(levels):
        value = [value]
    return value


def encodable(value) -> bool:
    try:
        orjson.dumps(value)
    except TypeError:
        return False
    return True


# -- a message from a client --------------------------------------------------------------
@given(JSON_VALUES, st.integers(0, 2 * MAX_DEPTH))
def test_a_message_is_refused_exactly_when_no_answer_could_carry_it(value, levels):
    text = json.dumps(nested(value, levels))
    problem = json_problem(text)
    parsed = json.loads(text)
    if problem is None:
        assert depth(text) <= MAX_DEPTH and encodable(parsed)
    else:
        assert "\n" not in problem
        assert depth(text) > MAX_DEPTH or not encodable(parsed)


# Live knobs only: a restart-class change (a model, say) would rebuild the engine, and an
# empty model is the demo model, made on first use.
KNOB_KEYS = st.sampled_from([k.name for k in KNOBS if not k.restart] +
                            [k.env for k in KNOBS if not k.restart]) | TEXT
MESSAGES = st.fixed_dictionaries(
    {"type": st.sampled_from(["settings", "other"]), "id": JSON_VALUES,
     "changes": st.dictionaries(KNOB_KEYS, JSON_VALUES, max_size=3)}) | JSON_VALUES


@pytest.fixture
def paused(live):
    live.session.pause()  # a paused session still applies settings, without decoding
    return live


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=MESSAGES)
def test_every_websocket_message_gets_one_answer_and_the_socket_stays(paused, message):
    async def exchange() -> list[dict]:
        async with websockets.connect(paused.ws_url, proxy=None) as ws:
            out = []
            for text in (json.dumps(message), '{"type": "settings", "id": 0, "changes": {}}'):
                await ws.send(text)
                while (msg := json.loads(await asyncio.wait_for(ws.recv(), 30)))["type"] \
                        == "snapshot":
                    pass
                out.append(msg)
            return out

    answer, after = asyncio.run(exchange())
    assert answer["type"] in ("ack", "error")
    if answer["type"] == "error":
        assert all("\n" not in p for p in answer["problems"].values())
    if isinstance(message, dict) and json_problem(json.dumps(message)) is None:
        assert answer["id"] == message.get("id")
    assert after["type"] == "ack" and after["id"] == 0


# -- a model's config.json ----------------------------------------------------------------
BASE = synth.TINY.hf_config()
SIZE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "head_dim", "num_experts", "num_experts_per_tok",
             "moe_intermediate_size", "rope_theta", "rms_norm_eps", "clip_qkv",
             "rope_parameters")
SIZES = st.integers(-2, 2**70) | st.sampled_from([0, 1, 2, 3, 16, 1024, 1 << 16, 1 << 20]) | \
    SCALARS | st.lists(st.integers(), max_size=2) | st.dictionaries(TEXT, SCALARS, max_size=2)


@given(st.dictionaries(st.sampled_from(SIZE_KEYS), SIZES, max_size=4))
def test_a_config_is_within_the_limits_or_refused_in_one_line(changes):
    try:
        mc = ModelConfig.from_hf({**BASE, **changes})
    except ModelError as err:
        assert "\n" not in str(err)
        return
    assert 1 <= mc.top_k <= mc.num_experts <= LIMITS["experts"]
    assert mc.num_layers * mc.num_experts <= MAX_PAIRS
    assert mc.num_heads % mc.num_kv_heads == 0 and mc.head_dim >= 1
    for value, key in ((mc.vocab_size, "vocab_size"), (mc.hidden_size, "hidden_size"),
                       (mc.expert_width, "expert_width"), (mc.head_dim, "head_dim")):
        assert 1 <= value <= LIMITS[key]
    assert 0 < mc.rope_theta < math.inf and 0 < mc.rms_eps < math.inf


# -- a trace's arrays ---------------------------------------------------------------------
DTYPES = st.sampled_from(["<i4", "<i8", "<f4", "|u1", "<U8", "|b1"])
SHAPES = st.lists(st.integers(0, 2**50) | st.integers(0, 5), max_size=4).map(tuple)
META = st.dictionaries(st.sampled_from(["num_experts", "expert_bytes", "sequence_starts",
                                        "model"]), JSON_VALUES | st.integers(-2, 2**64),
                       max_size=4)


@settings(max_examples=60, deadline=None)
@given(shape=SHAPES, dtype=DTYPES, stored=st.integers(0, 256), meta=META,
       experts_ok=st.booleans())
def test_a_trace_loads_or_is_refused_in_one_line(shape, dtype, stored, meta, experts_ok):
    """The experts array's header claims `shape` of `dtype` over `stored` bytes of data
    (or holds a real little array), under a generated meta."""
    experts = np.zeros((2, 2, 2), dtype=np.int32)
    arrays = {"meta": np.array(json.dumps(meta))}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.npz"
        with zipfile.ZipFile(path, "w") as z:
            for name, arr in arrays.items():
                z.writestr(f"{name}.npy", array_bytes(arr))
            if experts_ok:
                z.writestr("experts.npy", array_bytes(experts))
            else:
                out = io.BytesIO()
                npy.write_array_header_1_0(out, {"descr": dtype, "fortran_order": False,
                                                 "shape": shape})
                z.writestr("experts.npy", out.getvalue() + b"\0" * stored)
        try:
            trace = trace_format.load(path)
        except TraceError as err:
            assert "\n" not in str(err)
            return
    trace.check()
    assert trace.tokens >= 1 and 1 <= trace.num_experts <= LIMITS["experts"]


def array_bytes(arr: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, arr)
    return out.getvalue()
