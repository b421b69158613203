"""`tuner model gguf` without llama.cpp: each architecture's GGUF read back with the gguf
package (tensor names, shapes, types, values, vocabulary), and the inputs it refuses."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import gguf
import numpy as np
import pytest
import torch
from safetensors import safe_open

from tuner.cli import main
from tuner.engine.weights import synth
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.llamacpp.convert import WORD, GGUFError, convert

F32, BF16 = gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.BF16
# the tiny model in each architecture tuner's engine runs (Qwen2-MoE with its shared expert)
ARCHS = {"qwen3_moe": synth.TINY,
         "olmoe": replace(synth.TINY, name="tiny-olmoe", arch="olmoe", num_kv_heads=2),
         "mixtral": replace(synth.TINY, name="tiny-mixtral", arch="mixtral"),
         "qwen2_moe": replace(synth.TINY, name="tiny-qwen2", arch="qwen2_moe", shared_width=48)}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("arch-models")
    return {arch: synth.write(r, root / arch) for arch, r in ARCHS.items()}


def hf_tensor(folder, name) -> torch.Tensor:
    ckpt = Checkpoint(folder)
    for path in ckpt.files:
        with safe_open(str(path), framework="pt") as f:
            if name in f.keys():
                return f.get_tensor(name)
    raise KeyError(name)


def read_back(path) -> tuple[dict, dict]:
    r = gguf.GGUFReader(path)
    fields = {k: f.contents() for k, f in r.fields.items()}
    return {t.name: t for t in r.tensors}, fields


def array(t: gguf.ReaderTensor) -> torch.Tensor:
    """A tensor read back in torch's order (GGUF lists its dimensions reversed)."""
    data = np.asarray(t.data)
    if t.tensor_type == BF16:
        return torch.from_numpy(data.copy()).view(torch.bfloat16).float()
    return torch.from_numpy(data.copy())


@pytest.mark.parametrize("arch", ARCHS)
def test_every_tensor_has_llama_cpps_name_shape_and_type(arch, models, tmp_path):
    r = ARCHS[arch]
    out = convert(models[arch], tmp_path / "m.gguf", "bf16")
    tensors, fields = read_back(out.path)
    L, D, I, E, V = r.num_layers, r.hidden_size, r.expert_width, r.num_experts, r.vocab_size
    prefix = {"qwen3_moe": "qwen3moe", "olmoe": "olmoe", "mixtral": "llama",
              "qwen2_moe": "qwen2moe"}[arch]
    assert fields["general.architecture"] == prefix
    assert fields[f"{prefix}.block_count"] == L and fields[f"{prefix}.expert_count"] == E
    assert fields[f"{prefix}.expert_used_count"] == r.top_k
    assert fields["general.file_type"] == gguf.LlamaFileType.MOSTLY_BF16
    # GGUF's shapes are ggml's: innermost dimension first
    expected = {"token_embd.weight": ([D, V], BF16), "output.weight": ([D, V], BF16),
                "output_norm.weight": ([D], F32)}
    for l in range(L):
        b = f"blk.{l}."
        expected.update({
            b + "ffn_gate_exps.weight": ([D, I, E], BF16),
            b + "ffn_up_exps.weight": ([D, I, E], BF16),
            b + "ffn_down_exps.weight": ([I, D, E], BF16),
            b + "ffn_gate_inp.weight": ([D, E], F32),  # the router stays float32
            b + "attn_norm.weight": ([D], F32), b + "ffn_norm.weight": ([D], F32),
            b + "attn_q.weight": ([D, r.num_heads * r.head_dim], BF16),
            b + "attn_k.weight": ([D, r.num_kv_heads * r.head_dim], BF16),
            b + "attn_v.weight": ([D, r.num_kv_heads * r.head_dim], BF16),
            b + "attn_output.weight": ([r.num_heads * r.head_dim, D], BF16)})
        if arch in ("qwen3_moe", "olmoe"):
            width = r.head_dim if arch == "qwen3_moe" else None
            expected[b + "attn_q_norm.weight"] = ([width or r.num_heads * r.head_dim], F32)
            expected[b + "attn_k_norm.weight"] = ([width or r.num_kv_heads * r.head_dim], F32)
        if arch == "qwen2_moe":
            S = r.shared_width
            expected.update({
                b + "ffn_gate_shexp.weight": ([D, S], BF16),
                b + "ffn_up_shexp.weight": ([D, S], BF16),
                b + "ffn_down_shexp.weight": ([S, D], BF16),
                b + "ffn_gate_inp_shexp.weight": ([D, 1], F32)})
            expected.update({b + f"attn_{n}.bias": ([m * r.head_dim], F32)
                             for n, m in (("q", r.num_heads), ("k", r.num_kv_heads),
                                          ("v", r.num_kv_heads))})
    got = {name: (list(map(int, t.shape)), t.tensor_type) for name, t in tensors.items()}
    assert got == expected


def test_values_are_the_checkpoints(models, tmp_path):
    folder = models["qwen3_moe"]
    tensors, _ = read_back(convert(folder, tmp_path / "m.gguf").path)  # fp32: f32 default
    experts = array(tensors["blk.2.ffn_down_exps.weight"])  # [E, D, I]
    for e in (0, 7, 15):
        key = f"model.layers.2.mlp.experts.{e}.down_proj.weight"
        assert torch.equal(experts[e], hf_tensor(folder, key))
    assert torch.equal(array(tensors["blk.1.ffn_gate_inp.weight"]),
                       hf_tensor(folder, "model.layers.1.mlp.gate.weight"))
    assert torch.equal(array(tensors["token_embd.weight"]),
                       hf_tensor(folder, "model.embed_tokens.weight"))


def test_each_tensor_written_is_reported(models, tmp_path):
    seen: list[tuple[int, int]] = []
    convert(models["qwen3_moe"], tmp_path / "m.gguf", progress=lambda *done: seen.append(done))
    total = len(gguf.GGUFReader(tmp_path / "m.gguf").tensors)
    assert seen == [(i, total) for i in range(1, total + 1)]


def test_bf16_matrices_are_rounded_once(models, tmp_path):
    folder = models["qwen3_moe"]
    tensors, _ = read_back(convert(folder, tmp_path / "m.gguf", "bf16").path)
    hf = hf_tensor(folder, "model.layers.0.self_attn.o_proj.weight")
    assert torch.equal(array(tensors["blk.0.attn_output.weight"]), hf.bfloat16().float())


def test_mixtral_q_and_k_rows_are_interleaved_for_llama_cpps_rope(models, tmp_path):
    folder, r = models["mixtral"], ARCHS["mixtral"]
    tensors, _ = read_back(convert(folder, tmp_path / "m.gguf", "f32").path)
    for name, heads in (("q", r.num_heads), ("k", r.num_kv_heads)):
        hf = hf_tensor(folder, f"model.layers.0.self_attn.{name}_proj.weight")
        got = array(tensors[f"blk.0.attn_{name}.weight"])
        half = r.head_dim // 2
        for h in range(heads):  # HF's row i pairs with i + half; llama.cpp's 2j with 2j + 1
            rows = hf[h * r.head_dim:(h + 1) * r.head_dim]
            assert torch.equal(got[h * r.head_dim:(h + 1) * r.head_dim:2], rows[:half])
            assert torch.equal(got[h * r.head_dim + 1:(h + 1) * r.head_dim:2], rows[half:])


def test_the_word_level_vocabulary_is_written_as_wordpiece_words(models, tmp_path):
    _, fields = read_back(convert(models["qwen3_moe"], tmp_path / "m.gguf").path)
    tokens = fields["tokenizer.ggml.tokens"]
    V = synth.TINY.vocab_size
    assert fields["tokenizer.ggml.model"] == "bert" and len(tokens) == V
    assert tokens[:3] == [WORD + synth.word(0), WORD + synth.word(1), WORD + synth.word(2)]
    assert tokens[200] == WORD + synth.word(200) and tokens[V - 1] == "<unk>"
    types = fields["tokenizer.ggml.token_type"]
    assert types[0] == gguf.TokenType.NORMAL and types[V - 1] == gguf.TokenType.UNKNOWN
    for key in ("unknown_token_id", "bos_token_id", "seperator_token_id"):
        assert fields[f"tokenizer.ggml.{key}"] == V - 1


def test_a_vocabulary_smaller_than_the_model_is_padded(models, tmp_path):
    folder = tmp_path / "short-vocab"
    shutil.copytree(models["qwen3_moe"], folder)
    doc = json.loads((folder / "tokenizer.json").read_text())
    doc["model"]["vocab"] = {"ka": 0, "lo": 1, "<unk>": 2}
    (folder / "tokenizer.json").write_text(json.dumps(doc))
    _, fields = read_back(convert(folder, tmp_path / "m.gguf").path)
    assert fields["tokenizer.ggml.tokens"][:4] == [WORD + "ka", WORD + "lo", "<unk>", "[PAD3]"]
    assert fields["tokenizer.ggml.token_type"][3] == gguf.TokenType.UNUSED


def edited(models, tmp_path, arch="qwen3_moe", config=None, tokenizer=None):
    folder = tmp_path / "edited"
    shutil.copytree(models[arch], folder)
    if config:
        cfg = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**cfg, **config}))
    if tokenizer is not None:
        if tokenizer:
            (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
        else:
            (folder / "tokenizer.json").unlink()
    return folder


@pytest.mark.parametrize("arch, change, message", [
    ("qwen3_moe", {"norm_topk_prob": False},
     "norm_topk_prob = False, but llama.cpp always computes qwen3_moe with norm_topk_prob = True"),
    ("olmoe", {"clip_qkv": 8.0}, "only clip_qkv = null converts"),
    ("qwen3_moe", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
     "only rope_type default converts"),
])
def test_what_llama_cpp_would_compute_differently_is_refused(arch, change, message, models,
                                                              tmp_path):
    with pytest.raises(GGUFError, match=message):
        convert(edited(models, tmp_path, arch, config=change), tmp_path / "m.gguf")
    assert not (tmp_path / "m.gguf").exists()


def test_a_grouped_query_olmoe_is_refused(tmp_path):
    """Fewer key-value heads than query heads, in config.json and in the weights alike."""
    folder = synth.write(replace(ARCHS["olmoe"], name="tiny-olmoe-gqa", num_kv_heads=1),
                         tmp_path / "gqa")
    with pytest.raises(GGUFError, match="only num_key_value_heads = num_attention_heads "
                                        "converts"):
        convert(folder, tmp_path / "m.gguf")
    assert not (tmp_path / "m.gguf").exists()


def test_a_bpe_tokenizer_needs_llama_cpps_converter(models, tmp_path, monkeypatch):
    monkeypatch.setenv("LLAMACPP_CACHE", str(tmp_path / "no-llama.cpp"))
    bpe = {"model": {"type": "BPE", "vocab": {}, "merges": []}}
    with pytest.raises(GGUFError, match="only llama.cpp's convert_hf_to_gguf.py writes, and "
                       ".* is missing: run tools/llamacpp/build.sh"):
        convert(edited(models, tmp_path, tokenizer=bpe), tmp_path / "m.gguf")


def test_a_folder_without_tokenizer_or_unk_is_refused(models, tmp_path):
    with pytest.raises(GGUFError, match="tokenizer.json is missing: a GGUF carries"):
        convert(edited(models, tmp_path, tokenizer={}), tmp_path / "m.gguf")
    no_unk = {"model": {"type": "WordLevel", "vocab": {"ka": 0}, "unk_token": "<unk>"}}
    (tmp_path / "edited" / "tokenizer.json").write_text(json.dumps(no_unk))
    with pytest.raises(GGUFError, match="the unknown token '<unk>' is not in the vocabulary"):
        convert(tmp_path / "edited", tmp_path / "m.gguf")


def test_the_command_converts_tiny_and_refuses_what_it_cannot(models, tmp_path, capsys, refuses):
    out = tmp_path / "tiny.gguf"
    assert main(["model", "gguf", "tiny", str(out)]) == 0
    assert "(qwen3_moe, f32, written by tuner)" in capsys.readouterr().out
    assert gguf.GGUFReader(out).fields["general.name"].contents() == synth.TINY.id
    refuses(["model", "gguf", "tiny", str(out)], "already exists \\(use --force")
    quantized = tmp_path / "int8"
    assert main(["model", "quantize", str(models["qwen3_moe"]), str(quantized), "--bits", "8",
                 "--group", "32", "--tokens", "0"]) == 0
    refuses(["model", "gguf", str(quantized), str(tmp_path / "q.gguf")],
            "group-wise int8, which GGUF has no type for")
    assert main(["model", "gguf", str(tmp_path / "nowhere"), str(tmp_path / "n.gguf")]) == 2
    assert "does not exist" in capsys.readouterr().err
