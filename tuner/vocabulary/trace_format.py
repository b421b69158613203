"""The routing-trace exchange format: one `.npz` file.

* `experts`: integer [T, L, K]: the expert ids each token routed at each layer, in rank
  order; -1 marks an empty slot (a routing with fewer than K experts, or a layer with no
  routing for that token: no lookup).
* `logits` (optional): float [T, L, E]: the router's raw logits for every expert.
* `stale` (optional): float [T, L, E]: layer l's router applied to layer l-1's input, the
  stale-gate predictor's scores (seed 001); NaN at layer 0, which has no earlier input.
* `probs` (optional): float [T, L, K]: gate probabilities of the routed experts, aligned
  with `experts` (NaN where unknown); importers keep them when the source has them.
* `meta`: a JSON string holding an object: `model`, `num_experts`, `expert_bytes` (0 when
  unknown), `source`, and what the source said besides (`settings`, `sequence_starts`: the
  tokens where a new sequence starts, `layer_ids`: the source's layer ids when they are
  not 0..L-1, `import_problems`, ...).

T tokens in order, L layers in order; replay walks them in exactly that order.

A trace is read within limits (tuner.vocabulary.inputs): a regular file of at most 4 GiB whose
arrays together declare at most 4 GiB and at most 2**26 routed slots, a meta of at most 16
MiB; every array's header is read and checked before any array is inflated. Loading holds
the arrays once and checks them in blocks of at most 16 MiB, so it stays within the
arrays' size plus 40 MiB.
"""

from __future__ import annotations

import json
import math
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib import format as npy

from tuner.errors import TunerError
from tuner.vocabulary import inputs
from tuner.vocabulary.model_config import LIMITS, memory_bytes

ARRAYS = ("experts", "logits", "stale", "probs", "meta")
SCORES = ("logits", "stale")  # optional float arrays [T, L, E]
# A trace drives a model of its shape, so it has the sizes a model config may have.
MAX_LAYERS, MAX_EXPERTS = LIMITS["num_hidden_layers"], LIMITS["experts"]
CHECK_BYTES = 16 << 20  # what the checks of `experts` look at at a time
_DIRECTORY = 64 << 10  # a zip directory of a few arrays takes a few hundred bytes


class TraceError(TunerError, ValueError):
    """A trace file or array that does not follow the format; the message says how."""


@dataclass
class Trace:
    experts: np.ndarray  # [T, L, K] int32, -1 = empty slot
    meta: dict = field(default_factory=dict)
    logits: np.ndarray | None = None  # [T, L, E] float32
    probs: np.ndarray | None = None  # [T, L, K] float32
    stale: np.ndarray | None = None  # [T, L, E] float32, NaN at layer 0

    @property
    def tokens(self) -> int:
        return self.experts.shape[0]

    @property
    def layers(self) -> int:
        return self.experts.shape[1]

    @property
    def top_k(self) -> int:
        return self.experts.shape[2]

    @property
    def num_experts(self) -> int:
        return int(self.meta["num_experts"])

    @property
    def expert_bytes(self) -> int:
        return int(self.meta.get("expert_bytes") or 0)

    @property
    def sequence_starts(self) -> list[int]:
        return list(self.meta.get("sequence_starts") or [0])

    def rows(self) -> list[list[list[int]]]:
        """[token][layer] -> routed expert ids in rank order, empty slots left out."""
        return [[[e for e in ids if e >= 0] for ids in token] for token in
                self.experts.tolist()]

    def check(self, where: str = "trace") -> None:
        """Raises TraceError naming what is wrong and what is allowed."""
        ex = self.experts
        if ex.ndim != 3 or not np.issubdtype(ex.dtype, np.integer):
            raise TraceError(f"{where}: 'experts' must be an integer array [tokens, layers, k],"
                             f" got {ex.dtype} of shape {ex.shape}")
        T, L, K = ex.shape
        if not (T >= 1 and 1 <= L <= MAX_LAYERS and K >= 1):
            raise TraceError(f"{where}: 'experts' has shape {ex.shape}; a trace holds at least "
                             f"one token, 1 to {MAX_LAYERS} layers and one routed slot")
        n = self.meta.get("num_experts")
        if type(n) is not int or not 1 <= n <= MAX_EXPERTS:
            raise TraceError(f"{where}: meta 'num_experts' must be an integer from 1 to "
                             f"{MAX_EXPERTS:,}, got {inputs.brief(n)}")
        size = self.meta.get("expert_bytes")
        if size is not None and (type(size) is not int or not 0 <= size < 2**63):
            raise TraceError(f"{where}: meta 'expert_bytes' must be an integer >= 0 (0: not "
                             f"known), got {inputs.brief(size)}")
        starts = self.meta.get("sequence_starts") or [0]
        if not isinstance(starts, list) or not all(type(t) is int and 0 <= t < T
                                                   for t in starts):
            raise TraceError(f"{where}: meta 'sequence_starts' must be a list of token "
                             f"indices from 0 to {T - 1}")
        for t0, l0, block in _blocks(ex):  # a block at a time: no copy of the whole array
            bad = (block < -1) | (block >= n)
            if bad.any():
                t, l, r = np.unravel_index(int(bad.argmax()), bad.shape)
                raise TraceError(f"{where}: expert id {block[t, l, r]} at token {t0 + t}, "
                                 f"layer {l0 + l}, rank {r}; allowed: -1 (empty) or "
                                 f"0..{n - 1} (num_experts {n})")
            ordered = np.sort(block, axis=2)
            dup = (ordered[:, :, 1:] == ordered[:, :, :-1]) & (ordered[:, :, 1:] >= 0)
            if dup.any():
                t, l, r = np.unravel_index(int(dup.argmax()), dup.shape)
                raise TraceError(f"{where}: token {t0 + t}, layer {l0 + l} names expert "
                                 f"{ordered[t, l, r + 1]} twice; a routing names each expert "
                                 "at most once")
        for name, arr, shape in (("logits", self.logits, (T, L, n)),
                                 ("stale", self.stale, (T, L, n)),
                                 ("probs", self.probs, (T, L, K))):
            if arr is not None and not np.issubdtype(arr.dtype, np.floating):
                raise TraceError(f"{where}: '{name}' must be a float array, got {arr.dtype}")
            if arr is not None and arr.shape != shape:
                raise TraceError(f"{where}: '{name}' has shape {arr.shape}; with experts "
                                 f"{ex.shape} and num_experts {n} it must be {shape}")


def _blocks(ex: np.ndarray) -> Iterator[tuple[int, int, np.ndarray]]:
    """(first token, first layer, a view of `ex`) over all of `ex`, each block of at most
    CHECK_BYTES (or one routing): tokens at a time, layers at a time where one token's
    routings are larger."""
    T, L, K = ex.shape
    row = L * K * ex.itemsize
    if row <= CHECK_BYTES:
        step = CHECK_BYTES // row
        for t in range(0, T, step):
            yield t, 0, ex[t:t + step]
        return
    step = max(1, CHECK_BYTES // (K * ex.itemsize))
    for t in range(T):
        for l in range(0, L, step):
            yield t, l, ex[t:t + 1, l:l + step]


def save(trace: Trace, path: Path) -> None:
    """Writes `trace` to `path` whole or not at all; TraceError when it cannot be written
    (no such folder, a full disk), naming the path."""
    trace.check(str(path))
    arrays: dict[str, Any] = {"experts": trace.experts.astype(np.int32),
                              "meta": np.array(json.dumps(trace.meta))}
    for name in (*SCORES, "probs"):
        arr = getattr(trace, name)
        if arr is not None:
            arrays[name] = arr.astype(np.float32)
    try:  # a file object, so numpy does not append ".npz"
        inputs.write_atomic(path, lambda f: np.savez_compressed(f, **arrays))
    except inputs.PathError as err:
        raise TraceError(f"trace {err}") from None


def load(path: Path) -> Trace:
    where = str(path)
    try:
        with inputs.open_file(path, inputs.TRACE) as f:
            arrays = _read(f, where)
    except inputs.PathError as err:
        raise TraceError(f"trace {err}") from None
    except TraceError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise TraceError(f"{where}: not a trace (.npz) file: {err}") from None
    try:
        meta = inputs.loads(str(arrays["meta"]))
    except json.JSONDecodeError as err:
        raise TraceError(f"{where}: 'meta' is not JSON: {err}") from None
    if not isinstance(meta, dict):
        raise TraceError(f"{where}: 'meta' must be a JSON object, got {type(meta).__name__}")
    trace = Trace(arrays["experts"], meta, arrays.get("logits"), arrays.get("probs"),
                  arrays.get("stale"))
    trace.check(where)
    return trace


def _read(f, where: str) -> dict[str, np.ndarray]:
    """The arrays of the .npz open as `f` by name, once its directory and every array's
    header were checked."""
    if not zipfile.is_zipfile(f):
        raise TraceError(f"{where} is not a trace: a trace is the .npz archive `tuner trace "
                         "record` or `tuner trace import` writes; to bring a route log in, "
                         f"run `tuner trace import jsonl|vllm|csv {where} -o trace.npz`")
    _check_directory(f)
    with zipfile.ZipFile(f) as z:
        names = check_headers(z)
        if set(names) - set(ARRAYS) or "experts" not in names or "meta" not in names:
            raise TraceError(f"{where}: holds {sorted(names)}; a trace holds 'experts' and "
                             "'meta', optionally 'logits', 'stale' and 'probs'")
        arrays = {}
        for info in z.infolist():
            with z.open(info) as member:
                arrays[info.filename.removesuffix(".npy")] = npy.read_array(
                    member, allow_pickle=False)
    return arrays


def _check_directory(f) -> None:
    """ValueError unless the zip directory of `f` lists no more arrays than a trace has:
    the directory is read whole when the archive is opened, so a crafted one listing
    millions of members would otherwise grow the process first."""
    end = f.seek(0, 2)
    f.seek(max(0, end - 22 - 0xFFFF))  # the end record, after at most a 64 KiB comment
    tail = f.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        raise ValueError("no zip directory")
    members, size = struct.unpack("<HI", tail[at + 10:at + 16])
    if members > len(ARRAYS) or size > _DIRECTORY:
        raise ValueError(f"its zip directory lists {members:,} members in {size:,} bytes; a "
                         f"trace has at most {len(ARRAYS)} arrays")
    f.seek(0)


def check_headers(z: zipfile.ZipFile) -> list[str]:
    """The names of the arrays of an .npz, once every array's header was read and found to
    describe the bytes stored for it (an array is allocated at the size its header gives
    before it is read, so a header claiming 2**48 tokens would otherwise fail as a
    MemoryError) and all of them within a trace's limits. ValueError saying which array is
    wrong."""
    names, total = [], 0
    for info in z.infolist():
        name = info.filename.removesuffix(".npy")
        with z.open(info) as f:
            version = npy.read_magic(f)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f"array {name!r}: .npy format {version} is not read")
            read = npy.read_array_header_1_0 if version == (1, 0) else \
                npy.read_array_header_2_0
            shape, _, dtype = read(f)
            stored = info.file_size - f.tell()
        claimed = math.prod(shape) * dtype.itemsize
        if dtype.hasobject or claimed != stored:
            raise ValueError(f"array {name!r}: its header says {dtype} of shape {shape}, "
                             f"{claimed:,} bytes; {stored:,} are stored")
        if name == "meta" and (dtype.kind not in "US" or shape != () or
                               claimed > inputs.TRACE_META):
            raise ValueError(f"array 'meta': {dtype} of shape {shape}, {claimed:,} bytes; "
                             "'meta' is one JSON string of at most "
                             f"{inputs.TRACE_META:,} bytes")
        if name == "experts" and math.prod(shape) > inputs.TRACE_SLOTS:
            raise ValueError(f"array 'experts': shape {shape}, {math.prod(shape):,} routed "
                             f"slots; a trace holds at most {inputs.TRACE_SLOTS:,}")
        names.append(name)
        total += claimed
    if total > inputs.TRACE.size:
        raise ValueError(f"its arrays take {total:,} bytes; {inputs.TRACE.allowed()}, its "
                         "arrays together too")
    if total > memory_bytes():
        raise ValueError(f"its arrays take {total:,} bytes, more than this machine's "
                         f"{memory_bytes():,} bytes of memory")
    return names
