"""A local checkpoint folder: dense tensors loaded whole, expert tensors located on disk.

Experts are never loaded here. For each (layer, expert) the checkpoint knows the byte
extents of its three matrices in the safetensors shards, so the store can read an expert
with plain file reads straight into an arena slot. An expert whose matrices sit next to
each other in the file (the usual case: safetensors sorts tensor names) is one extent.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from tuner.engine.model import EXPERT_PARTS, FOLDER, ModelConfig, ModelError, read_config

_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


@dataclass(frozen=True)
class Part:
    """One expert matrix inside the packed expert buffer."""

    name: str
    offset: int  # bytes from the start of the packed buffer
    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class Extent:
    path: str
    offset: int  # bytes from the start of the file
    length: int
    dst: int  # bytes from the start of the packed buffer


def read_header(path: Path) -> tuple[int, dict]:
    """(offset of the data section, header dict) of a safetensors file; ModelError naming
    the file when it is not one, or is shorter than its header says."""
    size = Path(path).stat().st_size
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if 8 + n > size:
                raise ValueError(f"a header of {n} bytes in a file of {size}")
            header = json.loads(f.read(n))
        end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"),
                  default=0)
    except (struct.error, ValueError, TypeError, KeyError, IndexError,
            AttributeError) as err:
        raise ModelError(f"{path} is not a safetensors file ({type(err).__name__}: {err}): "
                         f"{FOLDER}") from None
    if 8 + n + end > size:
        raise ModelError(f"{path} is truncated: its header says {8 + n + end} bytes, the file "
                         f"has {size}; write or download it again")
    header.pop("__metadata__", None)
    return 8 + n, header


class Checkpoint:
    def __init__(self, folder: Path):
        """Raises ModelError, naming the file, for anything that makes the folder unusable."""
        self.folder = Path(folder)
        self.raw_config = read_config(self.folder)
        self.config = ModelConfig.read(self.folder, self.raw_config)
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
        self.parts = self._expert_parts()
        self.expert_bytes = sum(p.nbytes for p in self.parts)

    @property
    def name(self) -> str:
        return self.raw_config.get("tuner_recipe", {}).get("name") or self.folder.name

    def _shard_files(self) -> list[Path]:
        index = self.folder / "model.safetensors.index.json"
        if index.is_file():
            try:
                names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
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

    def _expert_parts(self) -> tuple[Part, ...]:
        """The packed layout of every expert: expert (0, 0)'s matrices in file order, so that
        an expert stored contiguously is read with one extent."""
        keys = [self.config.expert_key(0, 0, part) for part in EXPERT_PARTS]
        for key in keys:
            if key not in self._where:
                raise ModelError(f"{self.folder}: tensor {key} is missing from its "
                                 "*.safetensors; a routed expert has gate, up and down "
                                 "matrices")
        by_file = sorted(zip(EXPERT_PARTS, keys), key=lambda pk: self._where[pk[1]][:2])
        parts, offset = [], 0
        for part, key in by_file:
            _, _, length, dtype, shape = self._where[key]
            parts.append(Part(part, offset, shape, dtype))
            offset += length
        return tuple(parts)

    def extents(self, layer: int, expert: int) -> list[Extent]:
        """File extents of one expert, merged where they are contiguous."""
        out: list[Extent] = []
        for p in self.parts:
            key = self.config.expert_key(layer, expert, p.name)
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
        """Every tensor that is not an expert matrix, loaded whole."""
        out: dict[str, torch.Tensor] = {}
        routed = f".{self.config.spec.moe}.experts."
        for path in self.files:
            with safe_open(str(path), framework="pt") as f:
                for name in f.keys():
                    if routed not in name:
                        out[name] = f.get_tensor(name)
        return out

    def expert_tensor(self, layer: int, expert: int) -> torch.Tensor:
        """One expert's packed bytes read through safetensors (reference path for checks)."""
        buf = torch.empty(self.expert_bytes, dtype=torch.uint8)
        for p in self.parts:
            path = self._where[self.config.expert_key(layer, expert, p.name)][0]
            with safe_open(path, framework="pt") as f:
                t = f.get_tensor(self.config.expert_key(layer, expert, p.name))
            buf[p.offset:p.offset + p.nbytes] = t.contiguous().view(-1).view(torch.uint8)
        return buf


def part_views(buf: torch.Tensor, parts: tuple[Part, ...]) -> tuple[torch.Tensor, ...]:
    """Typed views (gate, up, down) into one packed expert buffer of uint8."""
    by_name = {p.name: p for p in parts}
    return tuple(
        buf[p.offset:p.offset + p.nbytes].view(p.dtype).view(p.shape)
        for p in (by_name[n] for n in EXPERT_PARTS)
    )
