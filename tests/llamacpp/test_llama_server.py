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
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

from tests.engine.test_hf_models import ARCHS, make
from tests.llamacpp.server import LlamaServer, Refused
from tuner.engine import synth
from tuner.engine.checkpoint import Checkpoint
from tuner.engine.decode import Engine
from tuner.gguf_export import convert
from tuner.knobs import Config
from tuner.presets import Preset, Store, shipped_dir
from tuner.presets_export import llama_cpp_placement, to_llama_cpp

pytestmark = pytest.mark.llamacpp

SHIPPED = sorted(p.stem for p in shipped_dir().glob("*.toml"))
PROMPT = [5, 17, 3, 60, 41, 8, 22, 90]
TOKENS = 32
TOP = 5  # next tokens compared at each position
LOGPROB_TOL = 1e-3  # float32 on both sides, summed in different orders


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


def assert_same_output(server: LlamaServer, expected: Expected) -> None:
    answer = server.greedy(PROMPT, TOKENS, TOP)
    assert answer["tokens"] == expected.ids, server.command
    got = [{t["id"]: t["logprob"] for t in p["top_logprobs"]}
           for p in answer["completion_probabilities"]]
    assert len(got) == TOKENS
    for pos, (g, e) in enumerate(zip(got, expected.tops)):
        assert g.keys() == e.keys(), f"top-{TOP} ids differ at token {pos}: {g} {e}"
        worst = max(abs(g[i] - e[i]) for i in e)
        assert worst < LOGPROB_TOL, f"log probability off by {worst} at token {pos}"


def random_model(arch: str, folder):
    """transformers' own tiny random model (its greedy text does not repeat one token, as
    the synthetic models' does) with a word-level vocabulary, as a GGUF."""
    model = make(arch, folder)
    synth.write_tokenizer(synth.Recipe(vocab_size=model.config.vocab_size), folder)
    return convert(folder, folder / "model.gguf", "f32").path


@pytest.mark.parametrize("arch", list(ARCHS))
def test_tokens_equal_tuners_on_tiny_random_models(arch, llama_server, tmp_path):
    gguf_file = random_model(arch, tmp_path)
    expected = expected_of(tmp_path)
    assert len(set(expected.ids)) > 4  # a real sequence, not one token repeated
    with LlamaServer(llama_server, gguf_file, [], tmp_path / "server.log") as server:
        assert_same_output(server, expected)


def test_a_text_prompt_splits_into_the_same_words(llama_server, tiny_model, tmp_path):
    """llama.cpp's WordPiece splits text into tuner's word ids, wrapped in BOS ... SEP,
    which a word-level vocabulary does not have: both are its unknown token."""
    gguf_file = convert(tiny_model, tmp_path / "tiny.gguf").path
    words = [synth.word(i) for i in (7, 19, 200, 31)]
    unk = synth.TINY.vocab_size - 1
    with LlamaServer(llama_server, gguf_file, [], tmp_path / "server.log") as server:
        got = server.post("/tokenize", {"content": " ".join(words)})["tokens"]
        assert got == [unk, 7, 19, 200, 31, unk]
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
    with LlamaServer(llama_server, gguf_file, flags, tmp_path / "server.log") as server:
        assert server.pinned() == placement.pinned, server.command
        assert_same_output(server, expected)


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
    with LlamaServer(llama_server, gguf_file, placement.flags, tmp_path / "server.log") as server:
        assert server.pinned() == placement.pinned, server.command
        assert_same_output(server, expected)
