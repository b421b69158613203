"""Checks of expert bytes as they are read, and the search for bad ones after the fact.

`verify_reads` (a restart-class knob) picks what each complete read must pass before the
engine computes with it:

1. its size is the expert's, and every value of its matrices is finite (no NaN or inf, as
   0xFF bytes and most torn writes give in floating point);
2. as 1, and its bytes match a CRC-32 recorded for every expert when the engine was built
   (a flipped bit in a finite value is caught only this way).

A failed check names the expert, the shard and the bytes; the read counts as failed.
"""

from __future__ import annotations

import os
import zlib

import torch

from tuner.engine.memory.store import Read
from tuner.engine.weights.checkpoint import Checkpoint, Part, read_into
from tuner.errors import TunerError

OFF, FINITE, CHECKSUM = 0, 1, 2


class NotFinite(TunerError, FloatingPointError):
    """A token's logits came out NaN or inf; the message names the expert whose bytes on
    disk did it, when one did."""


def read_expert(ckpt: Checkpoint, layer: int, expert: int) -> bytearray:
    """One expert's row (padding zero, as in the arena), read with plain file reads (never
    a memory map: a file cut short under a map ends the process with SIGBUS)."""
    buf = bytearray(ckpt.row_bytes)
    view = memoryview(buf)
    for ext in ckpt.extents(layer, expert):
        got = read_into(ext.path, ext.offset, view[ext.dst:ext.dst + ext.length])
        if got != ext.length:
            raise OSError(f"expert (layer {layer}, expert {expert}): "
                          f"{os.path.basename(ext.path)} ended {got} bytes into the "
                          f"{ext.length} bytes at {ext.offset}")
    return buf


def non_finite(buf, parts: tuple[Part, ...]) -> int:
    """How many values of an expert's matrices (and a quantized expert's scales) are NaN
    or infinite."""
    row = torch.frombuffer(buf, dtype=torch.uint8)
    return sum(int((~torch.isfinite(row[p.offset:p.offset + p.nbytes].view(p.dtype))).sum())
               for p in parts)


class Verifier:
    """The check a read pool runs on every complete expert read."""

    def __init__(self, ckpt: Checkpoint, level: int):
        self.ckpt, self.level = ckpt, level
        self.crc: dict[tuple[int, int], int] = {}
        if level >= CHECKSUM:
            mc = ckpt.config
            self.crc = {(l, e): zlib.crc32(read_expert(ckpt, l, e))
                        for l in range(mc.num_layers) for e in range(mc.num_experts)}

    def check(self, read: Read) -> str | None:
        if read.bytes_read != self.ckpt.expert_bytes:
            return f"read {read.bytes_read} bytes, the expert has {self.ckpt.expert_bytes}"
        bad = non_finite(read.dst, self.ckpt.parts)
        if bad:
            return f"{bad} of its values are not finite (NaN or inf): the file is damaged"
        if self.crc:
            got, want = zlib.crc32(read.dst), self.crc[read.key]
            if got != want:
                return (f"its bytes changed since the engine was built (CRC-32 {got:08x}, "
                        f"recorded {want:08x})")
        return None


def find_bad_expert(ckpt: Checkpoint, keys: list[tuple[int, int]]) -> str | None:
    """The first of `keys` whose bytes on disk hold a non-finite value, described, or
    None. For explaining non-finite logits after the fact."""
    for layer, expert in keys:
        try:
            bad = non_finite(read_expert(ckpt, layer, expert), ckpt.parts)
        except OSError as err:
            return str(err)
        if bad:
            where = ", ".join(f"{os.path.basename(x.path)} at bytes {x.offset}-"
                              f"{x.offset + x.length}" for x in ckpt.extents(layer, expert))
            return (f"expert (layer {layer}, expert {expert}) in {where} has {bad} "
                    "non-finite values")
    return None
