"""A local checkpoint folder: dense tensors loaded whole, expert tensors located on disk.

Experts are never loaded here. For each (layer, expert) the checkpoint knows the byte
extents of its matrices in the safetensors shards, so the store can read an expert with
plain file reads straight into an arena row. The `Layout` says where each matrix sits in
the row: gate and up back to back (so a batch of experts is one [k, 2I, D] product), then
down, each unit 64-byte aligned; for a quantized checkpoint the packed integers and the
scales of each (quant.py). Units follow file order, so an expert whose matrices sit next to
each other in the file (the usual case for float experts: safetensors sorts tensor names)
is one or two extents.
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from tuner.engine.weights.model import Weights
from tuner.engine.weights.quant import Quant
from tuner.vocabulary import inputs
from tuner.vocabulary.model_config import FOLDER, ModelConfig, ModelError, read_config

_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
           "I8": torch.int8, "U8": torch.uint8}
DTYPE_NAMES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
ALIGN = 64  # bytes: every unit of a row starts on a cache line


@dataclass(frozen=True)
class Part:
    """One tensor of an expert inside its arena row: a matrix (gate, up, down) or, in a
    quantized checkpoint, a matrix's packed integers (gate.q) or scales (gate.s)."""

    name: str
    offset: int  # bytes from the start of the row
    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class Layout:
    """Where an expert's tensors sit in an arena row of `row_bytes`."""

    parts: tuple[Part, ...]
    row_bytes: int
    quant: Quant | None = None

    @property
    def expert_bytes(self) -> int:
        """Bytes the store reads per expert (the row without its alignment padding)."""
        return sum(p.nbytes for p in self.parts)

    @property
    def by_name(self) -> dict[str, Part]:
        return {p.name: p for p in self.parts}

    def weights(self, rows: torch.Tensor) -> Weights:
        """Typed views of a batch of rows [k, row_bytes] (uint8, contiguous rows)."""
        k, parts = rows.shape[0], self.by_name

        def pair(first: str, second: str) -> torch.Tensor:  # two equal parts back to back
            a = parts[first]
            flat = rows[:, a.offset:a.offset + 2 * a.nbytes].view(a.dtype)
            return flat.view(k, 2 * a.shape[0], *a.shape[1:])

        def one(name: str) -> torch.Tensor:
            p = parts[name]
            return rows[:, p.offset:p.offset + p.nbytes].view(p.dtype).view(k, *p.shape)

        if self.quant is None:
            return Weights(pair("gate", "up"), one("down"))
        return Weights(pair("gate.q", "up.q"), one("down.q"), pair("gate.s", "up.s"),
                       one("down.s"), self.quant)


def _units(quant: Quant | None) -> tuple[tuple[str, ...], ...]:
    """Groups of parts that must sit back to back in a row."""
    if quant is None:
        return ("gate", "up"), ("down",)
    return ("gate.q", "up.q"), ("gate.s", "up.s"), ("down.q",), ("down.s",)


def _tensor_suffix(part: str) -> tuple[str, str]:
    """(matrix, tensor name suffix) of a part: gate -> weight; gate.q -> qweight, .s -> scales."""
    matrix, _, kind = part.partition(".")
    return matrix, {"": "weight", "q": "qweight", "s": "scales"}[kind]


@dataclass(frozen=True)
class Extent:
    path: str
    offset: int  # bytes from the start of the file
    length: int
    dst: int  # bytes from the start of the packed buffer


def read_header(path: Path) -> tuple[int, dict]:
    """(offset of the data section, header dict) of a safetensors file; ModelError naming
    the file when it is not one, or is shorter than its header says."""
    try:
        with inputs.open_file(path, inputs.SAFETENSORS) as f:
            size = os.fstat(f.fileno()).st_size
            (n,) = struct.unpack("<Q", f.read(8))
            if 8 + n > size or n > inputs.SAFETENSORS_HEADER:
                raise ValueError(f"a header of {n:,} bytes in a file of {size:,}; a header "
                                 f"is at most {inputs.SAFETENSORS_HEADER:,} bytes")
            header = inputs.loads(f.read(n))
        header.pop("__metadata__", None)
        end = max((_extent(name, t)[1] for name, t in header.items()), default=0)
    except inputs.PathError as err:
        raise ModelError(f"{err}: {FOLDER}") from None
    except (struct.error, ValueError, TypeError, KeyError, IndexError,
            AttributeError) as err:
        raise ModelError(f"{path} is not a safetensors file ({type(err).__name__}: {err}): "
                         f"{FOLDER}") from None
    if 8 + n + end > size:
        raise ModelError(f"{path} is truncated: its header says {8 + n + end} bytes, the file "
                         f"has {size}; write or download it again")
    return 8 + n, header


def _extent(name: str, t: dict) -> tuple[int, int]:
    """(begin, end) of a tensor in the data section, once its header entry is consistent:
    its bytes are its shape's elements times its dtype's size, so nothing read from the
    file is ever viewed as a shape it does not hold."""
    begin, end = t["data_offsets"]
    shape, dtype = t["shape"], _DTYPES.get(t["dtype"])
    if not all(type(v) is int and v >= 0 for v in (begin, end, *shape)) or begin > end:
        raise ValueError(f"tensor {name}: offsets {t['data_offsets']} and shape {shape} must "
                         "be whole numbers >= 0, in order")
    if dtype is not None and math.prod(shape) * dtype.itemsize != end - begin:
        raise ValueError(f"tensor {name}: shape {shape} of {t['dtype']} is not the "
                         f"{end - begin} bytes of its offsets")
    return begin, end


class Checkpoint:
    def __init__(self, folder: Path):
        """Raises ModelError, naming the file, for anything that makes the folder unusable."""
        self.folder = Path(folder)
        self.raw_config = read_config(self.folder)
        self.config = ModelConfig.read(self.folder, self.raw_config)
        self.recipe = _recipe(self.raw_config, self.config, self.folder / "config.json")
        self.quant = Quant.from_config(self.raw_config.get("quantization_config"))
        self.files = self._shard_files()
        self._where: dict[str, tuple[str, int, int, torch.dtype, tuple[int, ...]]] = {}
        for path in self.files:
            base, header = read_header(path)
            for name, t in header.items():
                begin, end = t["data_offsets"]
                dtype = _DTYPES.get(t["dtype"])
                if dtype is None:
                    raise ModelError(f"{path}: tensor {name} has dtype {t['dtype']}; "
                                     f"supported: {', '.join(_DTYPES)}")
                self._where[name] = (str(path), base + begin, end - begin, dtype,
                                     tuple(t["shape"]))
        self._check_dense()
        self.layout = self._layout()
        self.parts = self.layout.parts
        self.expert_bytes = self.layout.expert_bytes
        self.row_bytes = self.layout.row_bytes

    @property
    def name(self) -> str:
        return self.recipe.get("name") or self.folder.name

    @property
    def topics(self) -> int:
        """Token topics of a model tuner made (1: none), which built-in workloads draw from."""
        return self.recipe.get("topics", 1)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the model's weights were made in: config.json's (torch_)dtype, else
        that of the experts' first matrix."""
        named = self.raw_config.get("dtype") or self.raw_config.get("torch_dtype")
        if isinstance(named, str) and isinstance(getattr(torch, named, None), torch.dtype):
            return getattr(torch, named)
        return self._where[self._tensor(0, 0, self.parts[0].name)][3]

    def _check_dense(self) -> None:
        """The dense tensors must have the shapes config.json gives, before any is loaded:
        the workload draws token ids below vocab_size, every layer routes over num_experts,
        and attention splits its projections by the head counts, so a config whose sizes
        disagree with the weights is one line here rather than a shape error at the first
        token. Optional tensors (biases, q/k norms, a separate LM head) are checked where
        they are present."""
        for name, (shape, required) in self._dense_shapes().items():
            if name not in self._where:
                if not required:
                    continue
                raise ModelError(f"{self.folder}: tensor {name} is missing from its "
                                 f"*.safetensors: {FOLDER}")
            have = self._where[name][4]
            if have != shape:
                raise ModelError(f"{self._where[name][0]}: tensor {name} has shape "
                                 f"{list(have)}; config.json's sizes make it {list(shape)}")

    def _dense_shapes(self) -> dict[str, tuple[tuple[int, ...], bool]]:
        """Dense tensor name -> (its shape by config.json, whether a model must have it)."""
        mc = self.config
        D, V, Dh = mc.hidden_size, mc.vocab_size, mc.head_dim
        q, kv = mc.num_heads * Dh, mc.num_kv_heads * Dh
        norms = {"head": (Dh, Dh), "full": (q, kv)}.get(mc.spec.qk_norm)
        want = {"model.embed_tokens.weight": ((V, D), True), "model.norm.weight": ((D,), True),
                "lm_head.weight": ((V, D), False)}
        for l in range(mc.num_layers):
            a = f"model.layers.{l}.self_attn."
            want |= {mc.router_key(l): ((mc.num_experts, D), True),
                     f"model.layers.{l}.input_layernorm.weight": ((D,), True),
                     f"model.layers.{l}.post_attention_layernorm.weight": ((D,), True),
                     a + "q_proj.weight": ((q, D), True), a + "k_proj.weight": ((kv, D), True),
                     a + "v_proj.weight": ((kv, D), True), a + "o_proj.weight": ((D, q), True),
                     a + "q_proj.bias": ((q,), False), a + "k_proj.bias": ((kv,), False),
                     a + "v_proj.bias": ((kv,), False)}
            if norms:  # qk_norm "head" needs both (the model expands them per head)
                want |= {a + "q_norm.weight": ((norms[0],), mc.spec.qk_norm == "head"),
                         a + "k_norm.weight": ((norms[1],), mc.spec.qk_norm == "head")}
        return want

    def _tensor(self, layer: int, expert: int, part: str) -> str:
        matrix, suffix = _tensor_suffix(part)
        return self.config.expert_key(layer, expert, matrix).removesuffix("weight") + suffix

    def _shard_files(self) -> list[Path]:
        index = self.folder / "model.safetensors.index.json"
        if index.is_file():
            try:
                names = sorted(set(inputs.loads(inputs.read_bytes(
                    index, inputs.SAFETENSORS_INDEX))["weight_map"].values()))
            except inputs.PathError as err:
                raise ModelError(f"{err}: {FOLDER}") from None
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
                raise ModelError(f"{index} is not a safetensors index ({type(err).__name__}: "
                                 f"{err}); it maps tensor names to shard files under "
                                 "'weight_map'") from None
            files = [self.folder / n for n in names]
        else:
            files = sorted(self.folder.glob("*.safetensors"))
        if not files:
            raise ModelError(f"{self.folder} has no *.safetensors weights: {FOLDER}")
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise ModelError(f"{index} lists shards that are missing from {self.folder}: "
                             f"{', '.join(missing)}")
        return files

    def _layout(self) -> Layout:
        """Expert (0, 0)'s tensors laid out in a row: units in file order, 64-byte aligned."""
        units = _units(self.quant)
        for unit in units:
            for part in unit:
                key = self._tensor(0, 0, part)
                if key not in self._where:
                    raise ModelError(f"{self.folder}: tensor {key} is missing from its "
                                     "*.safetensors; a routed expert has gate, up and down "
                                     "matrices")
        first = {unit: self._where[self._tensor(0, 0, unit[0])][:2] for unit in units}
        parts, offset = [], 0
        for unit in sorted(units, key=first.__getitem__):
            for part in unit:
                _, _, length, dtype, shape = self._where[self._tensor(0, 0, part)]
                parts.append(Part(part, offset, shape, dtype))
                offset += length
            offset = -(-offset // ALIGN) * ALIGN
        return Layout(tuple(parts), offset, self.quant)

    def extents(self, layer: int, expert: int) -> list[Extent]:
        """File extents of one expert, merged where they are contiguous in the file and in
        the row."""
        out: list[Extent] = []
        for p in self.parts:
            key = self._tensor(layer, expert, p.name)
            if key not in self._where:
                raise ModelError(f"{self.folder}: tensor {key} is missing from its "
                                 "*.safetensors; every layer has every expert")
            path, off, length, dtype, shape = self._where[key]
            if (dtype, shape) != (p.dtype, p.shape):
                raise ModelError(f"{path}: expert ({layer}, {expert}) {p.name}: {dtype} {shape} "
                                 f"differs from expert (0, 0): {p.dtype} {p.shape}; every "
                                 "expert must have the same shapes")
            last = out[-1] if out else None
            if (last and last.path == path and last.offset + last.length == off
                    and last.dst + last.length == p.offset):
                out[-1] = Extent(path, last.offset, last.length + length, last.dst)
            else:
                out.append(Extent(path, off, length, p.offset))
        return out

    def dense(self) -> dict[str, torch.Tensor]:
        """Every tensor that is not an expert matrix, loaded whole into memory of its own.
        Read, never memory-mapped: a shard cut short under a map ends the process with
        SIGBUS, while a short read is an error that names the shard."""
        routed = f".{self.config.spec.moe}.experts."
        return {name: self._read_tensor(name) for name in self._where if routed not in name}

    def _read_tensor(self, name: str) -> torch.Tensor:
        path, offset, length, dtype, shape = self._where[name]
        buf = torch.empty(length, dtype=torch.uint8)
        got = read_into(path, offset, buf.numpy().data)
        if got != length:
            raise OSError(f"{path}: tensor {name} needs bytes {offset}-{offset + length}, "
                          f"the file ends {got} bytes in: it was truncated or replaced")
        return buf.view(dtype).view(shape)

    def expert_tensor(self, layer: int, expert: int) -> torch.Tensor:
        """One expert's row read through safetensors, padding zero (reference for checks)."""
        buf = torch.zeros(self.row_bytes, dtype=torch.uint8)
        for p in self.parts:
            key = self._tensor(layer, expert, p.name)
            with safe_open(self._where[key][0], framework="pt") as f:
                t = f.get_tensor(key)
            buf[p.offset:p.offset + p.nbytes] = t.contiguous().view(-1).view(torch.uint8)
        return buf


def _recipe(cfg: dict, mc: ModelConfig, where: Path) -> dict:
    """config.json's `tuner_recipe` ({} when absent): how tuner made a model, an object
    whose `name` is text and `topics` a whole number from 1 to the vocabulary size."""
    recipe = cfg.get("tuner_recipe", {})
    allowed = ("tuner_recipe is the object tuner writes into a model it makes (a name, "
               f"topics from 1 to vocab_size {mc.vocab_size}); remove it from any other model")
    if not isinstance(recipe, dict):
        raise ModelError(f"{where}: tuner_recipe = {inputs.brief(recipe)}: {allowed}")
    name, topics = recipe.get("name", ""), recipe.get("topics", 1)
    if not isinstance(name, str) or type(topics) is not int or \
            not 1 <= topics <= mc.vocab_size:
        raise ModelError(f"{where}: tuner_recipe name {inputs.brief(name)}, topics "
                         f"{inputs.brief(topics)}: {allowed}")
    return recipe


def read_into(path: str, offset: int, view: memoryview) -> int:
    """Fills `view` from `path` at `offset` with plain reads; returns the bytes read, fewer
    than asked only where the file ends."""
    fd = os.open(path, os.O_RDONLY)
    try:
        got = 0
        while got < len(view):
            n = os.preadv(fd, [view[got:]], offset + got)
            if n == 0:
                break
            got += n
        return got
    finally:
        os.close(fd)

