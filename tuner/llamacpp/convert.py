"""A model folder written as one GGUF file that llama.cpp loads (`tuner model gguf`).

Tuner's own checkpoints (the demo, `--tiny`, `--shape` and `--like` models) carry a
word-level tokenizer that llama.cpp's convert_hf_to_gguf.py cannot write, so they are
written here with the `gguf` package, llama.cpp's own Python writer and tensor-name table:

* tensors: each Hugging Face name mapped through `gguf.get_tensor_name_map` (the table
  convert_hf_to_gguf.py uses), a layer's experts stacked into one [E, rows, cols] tensor
  per matrix (`blk.N.ffn_{gate,up,down}_exps`), Mixtral's q and k rows permuted for
  llama.cpp's interleaved rotary embedding, as the converter does;
* dtypes: as the converter writes them: vectors, norms, routers and biases in F32, the
  other matrices in F32 or BF16;
* vocabulary: llama.cpp has no word-level tokenizer. Its WordPiece ("bert") tokenizer
  lowercases, splits text at spaces and punctuation, and matches each word against tokens
  written "▁" + word, so a word-level vocabulary written that way splits text back into
  the same ids. WordPiece wraps a text prompt in BOS ... SEP whatever the model says; these
  models have neither, so both are the vocabulary's unknown token: give llama.cpp prompts
  as ids to compare tokens.

A folder whose tokenizer is not word-level (a released Qwen3-MoE, OLMoE or Mixtral with its
BPE or SentencePiece vocabulary) is what convert_hf_to_gguf.py is for: it is run from the
llama.cpp tree tools/llamacpp/build.sh fetched (the llamacpp tests check that on the same
weights both write the same tensors and model keys, byte for byte). Anything that cannot
convert is refused with one line naming what is wrong and what is allowed.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import torch
from safetensors import safe_open

from tuner import llamacpp
from tuner.engine.weights import synth
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.errors import TunerError
from tuner.vocabulary.model_config import EXPERT_PARTS, ModelConfig

# tuner's architecture -> llama.cpp's, and whether llama.cpp normalises the top-k routing
# weights for it (hard-wired in its graph: a config that says otherwise cannot be matched)
ARCHS = {"qwen3_moe": (gguf.MODEL_ARCH.QWEN3MOE, True),
         "qwen2_moe": (gguf.MODEL_ARCH.QWEN2MOE, False),
         "olmoe": (gguf.MODEL_ARCH.OLMOE, False),
         "mixtral": (gguf.MODEL_ARCH.LLAMA, True)}
DTYPES = {"f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
          "bf16": (gguf.GGMLQuantizationType.BF16, gguf.LlamaFileType.MOSTLY_BF16)}
# tensors llama.cpp wants in float32 whatever the file type (as convert_hf_to_gguf.py)
ALWAYS_F32 = (gguf.MODEL_TENSOR.FFN_GATE_INP, gguf.MODEL_TENSOR.FFN_GATE_INP_SHEXP)
WORD = "\u2581"  # WordPiece's word-start mark in llama.cpp


class GGUFError(TunerError, ValueError):
    """A model that cannot be written as GGUF; the message is the one line to print."""


@dataclass(frozen=True)
class Planned:
    """One GGUF tensor: its name, shape (torch order), type and how to read it."""

    name: str
    shape: tuple[int, ...]
    qtype: gguf.GGMLQuantizationType
    read: Callable[[], torch.Tensor]


@dataclass(frozen=True)
class Written:
    path: Path
    arch: str
    dtype: str
    writer: str  # "tuner" (a word-level vocabulary) or "convert_hf_to_gguf.py"


def default_dtype(ckpt: Checkpoint) -> str:
    """bf16 for a bfloat16 model, else f32 (a float16 model widens exactly to f32)."""
    return "bf16" if ckpt.dtype == torch.bfloat16 else "f32"


def convert(folder: Path, out: Path, dtype: str | None = None,
            progress: Callable[[int, int], None] | None = None) -> Written:
    """Writes `folder`'s model to `out`; `progress(done, total)` after each tensor tuner's
    writer wrote (llama.cpp's converter, run for a released vocabulary, reports none)."""
    ckpt = Checkpoint(folder)  # ModelError for a folder that is not a usable checkpoint
    if ckpt.quant is not None:
        raise GGUFError(f"{folder}: its experts are tuner's group-wise int{ckpt.quant.bits}, "
                        "which GGUF has no type for; convert the float model it was made from")
    dtype = dtype or default_dtype(ckpt)
    if dtype not in DTYPES:
        raise GGUFError(f"dtype {dtype!r}: allowed {', '.join(DTYPES)}")
    check_arch(ckpt)
    vocab = word_vocabulary(ckpt)
    if vocab is None:
        return run_llama_converter(ckpt, Path(out), dtype)
    scaling = ckpt.raw_config.get("rope_scaling") or ckpt.raw_config.get("rope_parameters")
    if scaling and scaling.get("rope_type", scaling.get("type", "default")) != "default":
        raise GGUFError(f"{folder}: rope scaling {scaling!r}: tuner's writer writes plain "
                        "RoPE, as tuner's engine computes it; only rope_type default converts")
    plan = tensor_plan(ckpt, DTYPES[dtype][0])
    write(ckpt, Path(out), dtype, plan, vocab, progress)
    return Written(Path(out), ckpt.config.arch, dtype, "tuner")


def cached(folder: Path, dtype: str | None = None) -> tuple[Path, bool]:
    """The model's GGUF in tuner's cache (`gguf/` beside the made models), written on first
    use and reused after: named by the model's folder (its name and version), the dtype and a
    fingerprint of its files' names, sizes and times, so a model made again or changed is
    written again and the file it replaces removed. (the file, whether it was there)."""
    ckpt = Checkpoint(folder)
    dtype = dtype or default_dtype(ckpt)
    digest = hashlib.sha256()
    for f in (ckpt.folder / "config.json", ckpt.folder / "tokenizer.json", *ckpt.files):
        if f.is_file():
            st = f.stat()
            digest.update(f"{f.name} {st.st_size} {st.st_mtime_ns}\n".encode())
    name = f"{ckpt.folder.name}-{dtype}-{digest.hexdigest()[:12]}.gguf"
    out = synth.cache_dir().parent / "gguf" / name
    if out.is_file():
        return out, True
    out.parent.mkdir(parents=True, exist_ok=True)
    # older files of this model, and what a write cut short left
    same = re.compile(rf"{re.escape(ckpt.folder.name)}-{dtype}-[0-9a-f]{{12}}\.gguf.*")
    for old in out.parent.iterdir():
        if same.fullmatch(old.name):
            old.unlink()
    partial = out.with_name(out.name + ".writing")  # never taken for a whole file
    convert(ckpt.folder, partial, dtype)
    partial.replace(out)
    return out, False


def check_arch(ckpt: Checkpoint) -> None:
    cfg = ckpt.config
    _, normalised = ARCHS[cfg.arch]
    if cfg.norm_topk_prob != normalised:
        raise GGUFError(f"{ckpt.folder}: norm_topk_prob = {cfg.norm_topk_prob}, but llama.cpp "
                        f"always computes {cfg.arch} with norm_topk_prob = {normalised}")
    if cfg.arch == "olmoe" and cfg.num_kv_heads != cfg.num_heads:
        raise GGUFError(f"{ckpt.folder}: num_key_value_heads = {cfg.num_kv_heads} of "
                        f"{cfg.num_heads} heads: llama.cpp's OLMoE normalises k over every "
                        "head; only num_key_value_heads = num_attention_heads converts")
    if cfg.clip_qkv is not None:
        raise GGUFError(f"{ckpt.folder}: clip_qkv = {cfg.clip_qkv}: llama.cpp's {cfg.arch} "
                        "does not clip q, k and v; only clip_qkv = null converts")


def word_vocabulary(ckpt: Checkpoint) -> tuple[list[str], list[int], int] | None:
    """(tokens, token types, unknown id) of a word-level tokenizer.json, padded to the
    model's vocabulary; None for another kind of tokenizer (BPE, Unigram, ...)."""
    path = ckpt.folder / "tokenizer.json"
    if not path.is_file():
        raise GGUFError(f"{path} is missing: a GGUF carries the model's vocabulary; give the "
                        "folder its Hugging Face tokenizer.json")
    try:
        model = json.loads(path.read_text())["model"]
        kind = model["type"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise GGUFError(f"{path} is not a Hugging Face tokenizer ({type(err).__name__}: "
                        f"{err}): it has a 'model' with a 'type'") from None
    if kind != "WordLevel":
        return None
    vocab, unk, size = model["vocab"], model.get("unk_token"), ckpt.config.vocab_size
    if unk not in vocab:
        raise GGUFError(f"{path}: the unknown token {unk!r} is not in the vocabulary; a "
                        "word-level vocabulary converts with its unk_token in it")
    if max(vocab.values()) >= size:
        raise GGUFError(f"{path}: ids up to {max(vocab.values())} in a model of vocab_size "
                        f"{size}; every id must be < vocab_size")
    tokens = [f"[PAD{i}]" for i in range(size)]  # ids no word has (as the converter pads)
    types = [gguf.TokenType.UNUSED] * size
    for text, i in vocab.items():
        tokens[i], types[i] = WORD + text, gguf.TokenType.NORMAL
    tokens[vocab[unk]], types[vocab[unk]] = unk, gguf.TokenType.UNKNOWN
    return tokens, types, vocab[unk]


def tensor_plan(ckpt: Checkpoint, matrix_type: gguf.GGMLQuantizationType) -> list[Planned]:
    cfg = ckpt.config
    arch, _ = ARCHS[cfg.arch]
    names = gguf.get_tensor_name_map(arch, cfg.num_layers)
    where = {name: path for path in ckpt.files for name in shard_names(path)}
    routed = f".{cfg.spec.moe}.experts."
    plan = []
    for name in where:
        if routed in name:
            continue  # stacked per layer below
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise GGUFError(f"{ckpt.folder}: tensor {name} has no llama.cpp {arch.name.lower()} "
                            "name; only the tensors of a Qwen3-MoE, Qwen2-MoE, OLMoE or "
                            "Mixtral checkpoint convert")
        shape = shape_of(where[name], name)
        qtype = tensor_type(names, name, gguf_name, shape, matrix_type)
        plan.append(Planned(gguf_name, shape, qtype,
                            lambda n=name: permuted(cfg, n, read(where[n], n))))
    for layer in range(cfg.num_layers):
        for part in EXPERT_PARTS:
            keys = [cfg.expert_key(layer, e, part) for e in range(cfg.num_experts)]
            merged = keys[0].replace(f"{routed}0.", routed)  # ...experts.gate_proj.weight
            plan.append(Planned(names.get_name(merged, try_suffixes=(".weight",)),
                                (len(keys), *ckpt.layout.by_name[part].shape), matrix_type,
                                lambda ks=keys: torch.stack([read(where[k], k) for k in ks])))
    return plan


def tensor_type(names: gguf.TensorNameMap, name: str, gguf_name: str, shape: tuple[int, ...],
                matrix_type: gguf.GGMLQuantizationType) -> gguf.GGMLQuantizationType:
    """F32 for vectors, norms, routers and biases (as convert_hf_to_gguf.py writes them:
    llama.cpp computes these in float32), `matrix_type` for the other matrices."""
    kind, _ = names.get_type_and_name(name, try_suffixes=(".weight", ".bias"))
    if len(shape) == 1 or kind in ALWAYS_F32 or gguf_name.endswith("_norm.weight") \
            or not gguf_name.endswith(".weight"):
        return gguf.GGMLQuantizationType.F32
    return matrix_type


def shard_names(path: Path) -> list[str]:
    with safe_open(str(path), framework="pt") as f:
        return list(f.keys())


def shape_of(path: Path, name: str) -> tuple[int, ...]:
    with safe_open(str(path), framework="pt") as f:
        return tuple(f.get_slice(name).get_shape())


def read(path: Path, name: str) -> torch.Tensor:
    with safe_open(str(path), framework="pt") as f:
        return f.get_tensor(name)


def permuted(cfg: ModelConfig, name: str, t: torch.Tensor) -> torch.Tensor:
    """Mixtral's q and k rows reordered from Hugging Face's half-split rotary pairs to
    llama.cpp's interleaved ones (convert_hf_to_gguf.py's LlamaModel.permute)."""
    heads = {"q_proj": cfg.num_heads, "k_proj": cfg.num_kv_heads}.get(name.split(".")[-2])
    if cfg.arch != "mixtral" or heads is None:
        return t
    return t.reshape(heads, 2, t.shape[0] // heads // 2, *t.shape[1:]).swapaxes(1, 2) \
        .reshape(t.shape)


def as_array(t: torch.Tensor, qtype: gguf.GGMLQuantizationType) -> np.ndarray:
    if qtype == gguf.GGMLQuantizationType.BF16:
        return t.to(torch.bfloat16).contiguous().view(torch.uint16).numpy()
    return t.to(torch.float32).contiguous().numpy()


def write(ckpt: Checkpoint, out: Path, dtype: str, plan: list[Planned],
          vocab: tuple[list[str], list[int], int],
          progress: Callable[[int, int], None] | None = None) -> None:
    """Header and tensor table first, then one tensor at a time (a layer's experts are the
    most held in memory at once); written to a temp file renamed at the end."""
    cfg, raw = ckpt.config, ckpt.raw_config
    arch, _ = ARCHS[cfg.arch]
    tmp = out.with_name(out.name + ".partial")
    w = gguf.GGUFWriter(tmp, gguf.MODEL_ARCH_NAMES[arch])
    w.add_name(ckpt.name)
    w.add_file_type(DTYPES[dtype][1])
    w.add_block_count(cfg.num_layers)
    w.add_context_length(raw.get("max_position_embeddings", 4096))
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(raw.get("intermediate_size", cfg.expert_width))
    w.add_head_count(cfg.num_heads)
    w.add_head_count_kv(cfg.num_kv_heads)
    if raw.get("head_dim"):  # else llama.cpp takes hidden_size / heads, as tuner does
        w.add_key_length(cfg.head_dim)
        w.add_value_length(cfg.head_dim)
    w.add_rope_freq_base(cfg.rope_theta)
    w.add_layer_norm_rms_eps(cfg.rms_eps)
    w.add_expert_count(cfg.num_experts)
    w.add_expert_used_count(cfg.top_k)
    if cfg.arch in ("qwen3_moe", "qwen2_moe"):
        w.add_expert_feed_forward_length(cfg.expert_width)
    if raw.get("shared_expert_intermediate_size"):
        w.add_expert_shared_feed_forward_length(raw["shared_expert_intermediate_size"])
    if cfg.arch == "mixtral":
        w.add_vocab_size(cfg.vocab_size)
        w.add_rope_dimension_count(cfg.head_dim)
    tokens, types, unk = vocab
    w.add_tokenizer_model("bert")
    w.add_token_list(tokens)
    w.add_token_types(types)
    for add in (w.add_unk_token_id, w.add_bos_token_id, w.add_sep_token_id):
        add(unk)
    for p in plan:
        size = np.dtype(np.uint16 if p.qtype == gguf.GGMLQuantizationType.BF16 else
                        np.float32)
        w.add_tensor_info(p.name, p.shape, size, int(np.prod(p.shape)) * size.itemsize,
                          raw_dtype=p.qtype)
    try:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for i, p in enumerate(plan, 1):
            t = p.read()
            if tuple(t.shape) != p.shape:
                raise GGUFError(f"{ckpt.folder}: {p.name} is {tuple(t.shape)}, expected "
                                f"{p.shape}; every expert of a layer has the same shapes")
            w.write_tensor_data(as_array(t, p.qtype))
            if progress:
                progress(i, len(plan))
    except BaseException:
        w.close()
        tmp.unlink(missing_ok=True)
        raise
    w.close()
    tmp.replace(out)


def run_llama_converter(ckpt: Checkpoint, out: Path, dtype: str) -> Written:
    """convert_hf_to_gguf.py from the llama.cpp tree of tools/llamacpp/build.sh, for a
    folder whose vocabulary llama.cpp's converter knows and tuner's writer does not."""
    script = llamacpp.source_tree() / "convert_hf_to_gguf.py"
    if not script.is_file():
        raise GGUFError(f"{ckpt.folder}: its tokenizer is not word-level, which only "
                        f"llama.cpp's convert_hf_to_gguf.py writes, and {script} is missing: "
                        f"run {llamacpp.BUILD} (it fetches llama.cpp) or set LLAMACPP_CACHE")
    cmd = [sys.executable, str(script), str(ckpt.folder), "--outfile", str(out),
           "--outtype", dtype]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise GGUFError(f"{ckpt.folder}: llama.cpp's convert_hf_to_gguf.py failed: {last}")
    return Written(out, ckpt.config.arch, dtype, "convert_hf_to_gguf.py")
