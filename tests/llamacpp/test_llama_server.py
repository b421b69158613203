"""Exported presets proven on a real llama-server (opt-in: -m llamacpp, after
tools/llamacpp/build.sh): tuner's models converted to GGUF give the same greedy tokens in
llama.cpp as `tuner run --temperature 0`, and the same top-5 next tokens and log
probabilities as tuner's engine at every position (the synthetic models' greedy text
repeats one word, so the ids alone would prove little there); every shipped preset's
exported flags are accepted and place the expert tensors where the export says.

llama.cpp computes exact routing: the knobs it has no equivalent for (moce's bonus,
drop-cold-experts: the export lists them as dropped) are not in what it runs, so its tokens
are compared with tuner's engine at the defaults, whose outputs every lossless knob keeps."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass

import gguf
import numpy as np
import pytest
import tokenizers
import torch

from tests.engine.test_hf_models import ARCHS, make
from tests.llamacpp.server import LlamaServer, Refused
from tuner import llamacpp
from tuner.engine.step.decode import Engine
from tuner.engine.weights import synth
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config
from tuner.llamacpp.convert import convert
from tuner.presets import Preset, Store, shipped_dir
from tuner.presets.export import llama_cpp_placement, to_llama_cpp

# a test's first use of a module fixture makes a model, converts it and runs tuner on it:
# minutes on a busy 2-core machine, beyond the suite's 300 s
pytestmark = [pytest.mark.llamacpp, pytest.mark.timeout(900)]

SHIPPED = sorted(p.stem for p in shipped_dir().glob("*.toml"))
PROMPT = [5, 17, 3, 60, 41, 8, 22, 90]
TOKENS = 32
TOP = 5  # next tokens compared at each position
# llama.cpp keeps its KV cache in float16 and its CPU flash attention computes in float16:
# with those defaults log probabilities differed from tuner's by up to 0.01 (the ids did
# not). Attention in float32, as tuner's engine computes it, leaves 5e-6.
EXACT = ["--flash-attn", "off", "--cache-type-k", "f32", "--cache-type-v", "f32"]
LOGPROB_TOL = 1e-4


@dataclass(frozen=True)
class Expected:
    """What tuner says of a model: `tuner run`'s greedy ids after PROMPT and the engine's
    top next tokens at each of them."""

    ids: list[int]
    tops: list[dict[int, float]]


def tuner_greedy(model) -> list[int]:
    """`tuner run --prompt-ids ... --temperature 0 --json`'s output_ids (exact routing)."""
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "run", "--model", str(model), "--prompt-ids",
         ",".join(map(str, PROMPT)), "--temperature", "0", "--json",
         "--tokens", str(len(PROMPT) + TOKENS)], capture_output=True, text=True, check=True)
    ids = json.loads(done.stdout)["output_ids"]
    assert len(ids) == TOKENS
    return ids


def engine_top(model, ids: list[int]) -> list[dict[int, float]]:
    """Tuner's engine along `ids` (the prompt, then the greedy tokens): at each generated
    position, the top next tokens and their log probabilities."""
    engine = Engine(Checkpoint(model), Config(model=str(model)), torch.device("cpu"))
    tops = []
    try:
        for pos in range(len(ids) - 1):
            logits = engine.step(ids[pos], pos)
            if pos >= len(PROMPT) - 1:
                values, top = torch.log_softmax(logits.double(), -1).topk(TOP)
                tops.append(dict(zip(top.tolist(), values.tolist())))
    finally:
        engine.close()
    return tops


def expected_of(model) -> Expected:
    ids = tuner_greedy(model)
    tops = engine_top(model, PROMPT + ids)
    assert [max(t, key=t.get) for t in tops] == ids  # the engine stepped alike
    return Expected(ids, tops)


def compare_output(server: LlamaServer, expected: Expected) -> int:
    """Asserts llama-server's greedy ids and top-5 log probabilities are tuner's; returns
    at how many positions the distributions were compared."""
    answer = server.greedy(PROMPT, TOKENS, TOP)
    assert answer["tokens"] == expected.ids, server.command
    # llama-server leaves out the probabilities of a token after which the text ends inside
    # a UTF-8 character (byte-level BPE): the others are matched to their positions by id,
    # in order (a mismatch shifts a position, and its distribution then differs)
    probs = iter(answer["completion_probabilities"])
    entry, compared = next(probs, None), 0
    for pos, (token, e) in enumerate(zip(answer["tokens"], expected.tops)):
        if entry is None or entry["id"] != token:
            continue
        g = {t["id"]: t["logprob"] for t in entry["top_logprobs"]}
        assert g.keys() == e.keys(), f"top-{TOP} ids differ at token {pos}: {g} {e}"
        worst = max(abs(g[i] - e[i]) for i in e)
        assert worst < LOGPROB_TOL, f"log probability off by {worst} at token {pos}"
        entry, compared = next(probs, None), compared + 1
    assert entry is None and compared == len(answer["completion_probabilities"])
    return compared


def random_model(arch: str, folder):
    """transformers' own tiny random model (its greedy text does not repeat one token, as
    the synthetic models' does) with a word-level vocabulary, as a GGUF. OLMoE with as many
    key/value heads as heads, as released: llama.cpp's OLMoE has no other."""
    model = make(arch, folder, **({"num_key_value_heads": 4} if arch == "olmoe" else {}))
    synth.write_tokenizer(synth.Recipe(vocab_size=model.config.vocab_size), folder)
    return convert(folder, folder / "model.gguf", "f32").path


@pytest.mark.parametrize("arch", list(ARCHS))
def test_tokens_equal_tuners_on_tiny_random_models(arch, llama_server, tmp_path):
    gguf_file = random_model(arch, tmp_path)
    expected = expected_of(tmp_path)
    assert len(set(expected.ids)) > 4  # a real sequence, not one token repeated
    with LlamaServer(llama_server, gguf_file, EXACT, tmp_path / "server.log") as server:
        assert compare_output(server, expected) == TOKENS


def test_a_text_prompt_splits_into_the_same_words(llama_server, tiny_model, tmp_path):
    """llama.cpp's WordPiece splits text into tuner's word ids, wrapped in BOS ... SEP,
    which a word-level vocabulary does not have: both are its unknown token."""
    gguf_file = convert(tiny_model, tmp_path / "tiny.gguf").path
    words = [synth.word(i) for i in (7, 19, 200, 31)]
    unk = synth.TINY.vocab_size - 1
    with LlamaServer(llama_server, gguf_file, [], tmp_path / "server.log") as server:
        text = " ".join(words)
        assert server.post("/tokenize", {"content": text})["tokens"] == [7, 19, 200, 31]
        wrapped = server.post("/tokenize", {"content": text, "add_special": True})["tokens"]
        assert wrapped == [unk, 7, 19, 200, 31, unk]  # as a text prompt is
        text = server.post("/detokenize", {"tokens": [7, 19, 200]})["content"]
        assert text.split() == words[:3]


# Presets beyond the shipped ones, so that each form of the export runs: on the 3-layer x
# 8-expert model an arena of 8 slots is one whole layer (--n-cpu-moe 2), quotas 8, 2, 6 of
# 16 slots keep layers 0 and 2 (-ot per layer), device = cpu places nothing.
EXTRA = {"one-layer": {"expert_cache": 8},
         "split": {"expert_cache": 16, "arena_split": "layers", "arena_budgets": "8,2,6"},
         "cpu-only": {"device": "cpu"}}


def preset(name: str) -> Preset:
    return Preset(name, EXTRA[name]) if name in EXTRA else Store().get(name)


@pytest.fixture(scope="module")
def qwen3_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen3-random")
    return folder, random_model("qwen3_moe", folder)


@pytest.fixture(scope="module")
def qwen3(qwen3_model):
    return *qwen3_model, expected_of(qwen3_model[0])


def test_the_presets_cover_each_form_of_the_export(qwen3_model):
    folder = str(qwen3_model[0])
    flags = {name: llama_cpp_placement(preset(name), folder, "cpu").flags
             for name in ["baseline", *EXTRA]}
    assert "--cpu-moe" in flags["baseline"]
    assert flags["one-layer"][2:4] == ["--n-cpu-moe", "2"]
    assert flags["split"][3] == r"blk\.(0|2)\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU"
    assert "--n-gpu-layers" not in flags["cpu-only"]


@pytest.mark.parametrize("name", SHIPPED + list(EXTRA))
def test_every_exported_form_is_accepted_and_placed_as_exported(name, llama_server, qwen3,
                                                                tmp_path):
    folder, gguf_file, expected = qwen3
    placement = llama_cpp_placement(preset(name), str(folder), "cpu")
    # the flags exactly as the export prints them, read as a shell reads them
    flags = shlex.split(to_llama_cpp(preset(name), str(folder), "cpu").splitlines()[-1])
    assert flags == placement.flags
    with LlamaServer(llama_server, gguf_file, flags + EXACT, tmp_path / "server.log") as server:
        assert server.pinned() == placement.pinned, server.command
        assert compare_output(server, expected) == TOKENS


def test_the_per_layer_pattern_pins_exactly_its_layers(llama_server, qwen3_model, tmp_path):
    """On a cpu target both -ot patterns name CPU, so the log cannot tell them apart: the
    first alone, through llama.cpp's own regex matching, pins the layers the export keeps
    on the GPU and no other."""
    folder, gguf_file = qwen3_model
    flags = llama_cpp_placement(preset("split"), str(folder), "cpu").flags
    first = flags.index("-ot")
    del flags[first + 2:first + 4]  # the catch-all -ot pattern
    with LlamaServer(llama_server, gguf_file, flags, tmp_path / "server.log") as server:
        assert server.pinned() == {0: "CPU", 2: "CPU"}


def test_a_cpu_only_build_refuses_a_gpu_buffer(llama_server, qwen3_model, tmp_path):
    folder, gguf_file = qwen3_model
    flags = llama_cpp_placement(preset("split"), str(folder), "cuda").flags
    with pytest.raises(Refused, match="unknown buffer type"):
        LlamaServer(llama_server, gguf_file, flags, tmp_path / "server.log")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo model (made here: its name changes with its version) as an f32 GGUF: its
    bfloat16 weights widened exactly, as tuner's engine computes them on the CPU."""
    root = tmp_path_factory.mktemp("demo")
    folder = synth.write(synth.DEFAULT, root / synth.DEFAULT.id)
    return folder, convert(folder, root / "demo.gguf", "f32").path, expected_of(folder)


@pytest.mark.parametrize("name", SHIPPED)
def test_demo_model_output_is_tuners_under_every_shipped_preset(name, llama_server, demo,
                                                                tmp_path):
    folder, gguf_file, expected = demo
    placement = llama_cpp_placement(preset(name), str(folder), "cpu")
    with LlamaServer(llama_server, gguf_file, placement.flags + EXACT,
                     tmp_path / "server.log") as server:
        assert server.pinned() == placement.pinned, server.command
        assert compare_output(server, expected) == TOKENS


@pytest.fixture(scope="module")
def qwen2_vocabulary(tmp_path_factory, llama_server):
    """A released vocabulary without a download: Qwen2's BPE, as llama.cpp's tree ships it
    for its tokenizer tests (models/ggml-vocab-qwen2.gguf), rebuilt as a Hugging Face
    tokenizer by transformers."""
    transformers = pytest.importorskip("transformers")
    vocab = llamacpp.source_tree() / "models" / "ggml-vocab-qwen2.gguf"
    tok = transformers.AutoTokenizer.from_pretrained(vocab.parent, gguf_file=vocab.name)
    folder = tmp_path_factory.mktemp("qwen2-vocabulary")
    tok.save_pretrained(folder)
    return folder, len(tok)


def released(arch: str, folder, vocabulary) -> None:
    """A random model with the released vocabulary (OLMoE's norm epsilon as released:
    llama.cpp's converter writes 1e-5 whatever config.json says)."""
    tokenizer, size = vocabulary
    kv_heads = {"num_key_value_heads": 4} if arch == "olmoe" else {}
    make(arch, folder, vocab_size=size, rms_norm_eps=1e-5, **kv_heads)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer / name, folder / name)


@pytest.mark.parametrize("arch, dtype", [(arch, "f32") for arch in ARCHS] +
                         [("qwen3_moe", "bf16")])
def test_tuners_writer_and_llama_cpps_converter_write_the_same_model(arch, dtype,
                                                                     qwen2_vocabulary,
                                                                     tmp_path):
    """The same weights with the released vocabulary (converted by llama.cpp's
    convert_hf_to_gguf.py, through `tuner model gguf`) and with a word-level one (written
    by tuner): every tensor and every model key equal, byte for byte."""
    released(arch, tmp_path / "bpe", qwen2_vocabulary)
    shutil.copytree(tmp_path / "bpe", tmp_path / "word", ignore=shutil.ignore_patterns("tok*"))
    synth.write_tokenizer(synth.Recipe(vocab_size=qwen2_vocabulary[1]), tmp_path / "word")
    theirs = convert(tmp_path / "bpe", tmp_path / "theirs.gguf", dtype)
    assert theirs.writer == "convert_hf_to_gguf.py"
    ours = convert(tmp_path / "word", tmp_path / "ours.gguf", dtype)
    a, b = gguf.GGUFReader(theirs.path), gguf.GGUFReader(ours.path)
    assert [t.name for t in a.tensors] and {t.name for t in a.tensors} == \
        {t.name for t in b.tensors}
    mine = {t.name: t for t in b.tensors}
    for t in a.tensors:
        m = mine[t.name]
        assert (list(t.shape), t.tensor_type) == (list(m.shape), m.tensor_type), t.name
        assert np.array_equal(np.asarray(t.data), np.asarray(m.data)), t.name

    def model_keys(r):
        return {k: f.contents() for k, f in r.fields.items()
                if not k.startswith(("GGUF.", "general.", "tokenizer."))}

    assert model_keys(a) == model_keys(b)


def test_a_released_vocabulary_runs_as_transformers_splits_it(llama_server, qwen2_vocabulary,
                                                              tmp_path):
    released("qwen3_moe", tmp_path, qwen2_vocabulary)
    gguf_file = convert(tmp_path, tmp_path / "model.gguf", "f32").path
    expected = expected_of(tmp_path)
    text = "Hello world, 3333 tokens! ruka veka"
    split = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode(text).ids
    with LlamaServer(llama_server, gguf_file, EXACT, tmp_path / "server.log") as server:
        assert server.post("/tokenize", {"content": text})["tokens"] == split
        assert compare_output(server, expected) >= TOKENS - 4  # see compare_output
