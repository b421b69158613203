"""Group-wise weight-only quantization of expert matrices: the checkpoint layout and the math.

Layout (what `tuner model quantize` writes, in ordinary safetensors shards): each expert
matrix `W [rows, cols]` (gate and up are [I, D], down is [D, I]) named `...NAME.weight`
in the source becomes two tensors,

* `...NAME.qweight`: the integers. 8 bits: int8 [rows, cols], one value per weight.
  4 bits: uint8 [rows, cols / 2], two weights per byte, each stored as `q + 8` (0..15 for
  q in -8..7): within each group of `group` weights of a row, byte j holds weight j in its
  low nibble and weight j + group / 2 in its high nibble (unpacking is then two halves
  side by side, several times cheaper than interleaving single nibbles);
* `...NAME.scales`: float16 [rows, cols / group], one scale per `group` consecutive weights
  of a row (along the input dimension, the one the matrix product sums over).

Symmetric, no zero points: `W[r, c] ~ q[r, c] * scales[r, c // group]`, with
`scale = max |W| over the group / qmax` (qmax 127 for 8 bits, 7 for 4 bits) and `q` the
rounded quotient. config.json says so in `quantization_config`
(`{"quant_method": "tuner-groupwise", "bits", "group_size", "scale_dtype": "float16"}`);
`torch_dtype` stays the source's dtype, which is what the model computes in. Dense weights
(attention, norms, routers, embeddings, shared experts) are copied unchanged.

The store streams the packed bytes: an expert's arena row holds its integers and scales,
so `expert_bytes` is about a quarter (4 bits) or half (8 bits) of bf16's, plus the scales.

Compute: `dequantize` expands a batch of experts per group into the compute dtype with
torch's own elementwise ops, then the same batched matrix products as unquantized experts
run (model.experts_out); on CPU and CUDA alike. Torch's own low-bit matmul kernels are not
used: `_weight_int8pack_mm` takes one scale per row, not per group, and the int4 kernels
(`_weight_int4pack_mm` on CUDA, `_weight_int4pack_mm_for_cpu`) are private operators that
want their own device-specific tiled layout with zero points, so every streamed expert
would have to be repacked after its upload, and the arena would hold a layout the store
cannot read straight into. At decode (one token) expanding the few routed experts costs
one pass over their weights in fast memory, which is small next to bringing their bytes
over the store and the link, and the numbers are the same on every device.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from tuner.errors import TunerError

BITS = (8, 4)
GROUPS = (32, 64, 128)
METHOD = "tuner-groupwise"
SCALE_DTYPE = torch.float16


class QuantError(TunerError, ValueError):
    """A quantization this engine does not read or write; the message says what is allowed."""


@dataclass(frozen=True)
class Quant:
    bits: int
    group: int

    def __post_init__(self) -> None:
        if self.bits not in BITS:
            raise QuantError(f"bits = {self.bits}: allowed {', '.join(map(str, BITS))}")
        if self.group not in GROUPS:
            raise QuantError(f"group = {self.group}: allowed {', '.join(map(str, GROUPS))}")

    @property
    def qmax(self) -> int:
        return 2 ** (self.bits - 1) - 1

    def packed_cols(self, cols: int) -> int:
        return cols if self.bits == 8 else cols // 2

    def config(self) -> dict:
        return {"quant_method": METHOD, "bits": self.bits, "group_size": self.group,
                "scale_dtype": "float16"}

    @classmethod
    def from_config(cls, raw: dict | None) -> Quant | None:
        """The quantization a config.json declares, or None for float experts."""
        if not raw:
            return None
        if raw.get("quant_method") != METHOD:
            raise QuantError(f"quantization_config.quant_method = {raw.get('quant_method')!r}"
                             f": only {METHOD!r} checkpoints (tuner model quantize) are read")
        return cls(int(raw["bits"]), int(raw["group_size"]))


def quantize(w: torch.Tensor, q: Quant) -> tuple[torch.Tensor, torch.Tensor]:
    """W [rows, cols] (any float dtype) -> (qweight, scales) in the layout above."""
    rows, cols = w.shape
    if cols % q.group:
        raise QuantError(f"a matrix of {cols} columns does not split into groups of {q.group}")
    wg = w.float().reshape(rows, cols // q.group, q.group)
    scales = (wg.abs().amax(-1) / q.qmax).to(SCALE_DTYPE)  # [rows, groups]
    safe = scales.float().clamp_min(torch.finfo(SCALE_DTYPE).tiny)[..., None]
    ints = (wg / safe).round().clamp(-q.qmax - 1, q.qmax).to(torch.int8)  # [rows, G, group]
    if q.bits == 8:
        return ints.reshape(rows, cols), scales
    nib = (ints + 8).to(torch.uint8)
    half = q.group // 2
    return (nib[..., :half] | (nib[..., half:] << 4)).reshape(rows, cols // 2), scales


def dequantize(packed: torch.Tensor, scales: torch.Tensor, q: Quant, dtype: torch.dtype
               ) -> torch.Tensor:
    """A batch of experts back to weights: packed [k, rows, packed_cols], scales
    [k, rows, cols / group] -> [k, rows, cols] in `dtype`."""
    k, rows, _ = packed.shape
    groups = scales.shape[-1]
    if q.bits == 8:
        w = packed.to(dtype).view(k, rows, groups, q.group)
    else:  # each group: the low nibbles are its first half, the high nibbles its second
        by_group = packed.view(k, rows, groups, q.group // 2)
        w = torch.cat((by_group & 15, by_group >> 4), dim=-1).to(dtype).sub_(8)
    return w.mul_(scales.to(dtype)[..., None]).view(k, rows, groups * q.group)


def write_quantized(src: Path, dst: Path, q: Quant, is_expert: Callable[[str], bool],
                    progress: Callable[[int, int], None] | None = None) -> Path:
    """Copies the checkpoint folder `src` to `dst` with every expert matrix (`is_expert` of
    its tensor name) quantized; written into a temporary folder renamed at the end."""
    src, dst = Path(src), Path(dst)
    if dst.exists():
        raise FileExistsError(f"{dst} already exists; remove it or choose another folder")
    tmp = dst.with_name(dst.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shards = sorted(src.glob("*.safetensors"))
    weight_map: dict[str, str] = {}
    for done, path in enumerate(shards, 1):
        out: dict[str, torch.Tensor] = {}
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():
                t = f.get_tensor(name)
                if is_expert(name) and name.endswith(".weight"):
                    base = name.removesuffix("weight")
                    out[base + "qweight"], out[base + "scales"] = quantize(t, q)
                else:
                    out[name] = t
        save_file(out, str(tmp / path.name), metadata={"format": "pt"})
        weight_map.update({name: path.name for name in out})
        if progress:
            progress(done, len(shards))
    for other in src.iterdir():
        if other.is_file() and other.suffix != ".safetensors" and other.name not in (
                "config.json", "model.safetensors.index.json"):
            shutil.copy2(other, tmp / other.name)
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"] = q.config()
    recipe = config.get("tuner_recipe")
    if recipe:  # the model's name says what was done to it
        recipe["name"] = f"{recipe['name']}-int{q.bits}g{q.group}"
    (tmp / "config.json").write_text(json.dumps(config, indent=1))
    total = sum((tmp / n).stat().st_size for n in set(weight_map.values()))
    (tmp / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1))
    os.replace(tmp, dst)
    return dst
