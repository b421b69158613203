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
"""

from __future__ import annotations

import json
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib import format as npy

from tuner.engine import inputs
from tuner.engine.model_config import LIMITS, memory_bytes
from tuner.errors import TunerError

ARRAYS = ("experts", "logits", "stale", "probs", "meta")
SCORES = ("logits", "stale")  # optional float arrays [T, L, E]
# A trace drives a model of its shape, so it has the sizes a model config may have.
MAX_LAYERS, MAX_EXPERTS = LIMITS["num_hidden_layers"], LIMITS["experts"]


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
                             f"{MAX_EXPERTS:,}, got {n!r}")
        size = self.meta.get("expert_bytes")
        if size is not None and (type(size) is not int or size < 0):
            raise TraceError(f"{where}: meta 'expert_bytes' must be an integer >= 0 (0: not "
                             f"known), got {size!r}")
        starts = self.meta.get("sequence_starts") or [0]
        if not isinstance(starts, list) or not all(type(t) is int and 0 <= t < T
                                                   for t in starts):
            raise TraceError(f"{where}: meta 'sequence_starts' must be a list of token "
                             f"indices from 0 to {T - 1}")
        bad = np.argwhere((ex < -1) | (ex >= n))
        if len(bad):
            t, l, r = bad[0]
            raise TraceError(f"{where}: expert id {ex[t, l, r]} at token {t}, layer {l}, rank "
                             f"{r}; allowed: -1 (empty) or 0..{n - 1} (num_experts {n})")
        ordered = np.sort(ex, axis=2)
        dup = np.argwhere((ordered[:, :, 1:] == ordered[:, :, :-1]) & (ordered[:, :, 1:] >= 0))
        if len(dup):
            t, l, r = dup[0]
            raise TraceError(f"{where}: token {t}, layer {l} names expert {ordered[t, l, r + 1]}"
                             " twice; a routing names each expert at most once")
        for name, arr, shape in (("logits", self.logits, (T, L, n)),
                                 ("stale", self.stale, (T, L, n)),
                                 ("probs", self.probs, (T, L, K))):
            if arr is not None and not np.issubdtype(arr.dtype, np.floating):
                raise TraceError(f"{where}: '{name}' must be a float array, got {arr.dtype}")
            if arr is not None and arr.shape != shape:
                raise TraceError(f"{where}: '{name}' has shape {arr.shape}; with experts "
                                 f"{ex.shape} and num_experts {n} it must be {shape}")


def save(trace: Trace, path: Path) -> None:
    trace.check(str(path))
    arrays: dict[str, Any] = {"experts": trace.experts.astype(np.int32),
                              "meta": np.array(json.dumps(trace.meta))}
    for name in (*SCORES, "probs"):
        arr = getattr(trace, name)
        if arr is not None:
            arrays[name] = arr.astype(np.float32)
    with open(path, "wb") as f:  # a file object, so numpy does not append ".npz"
        np.savez_compressed(f, **arrays)


def load(path: Path) -> Trace:
    where = str(path)
    try:
        what = inputs.kind(path)
    except inputs.PathError as err:
        raise TraceError(f"trace {err}") from None
    if what != "file":
        raise TraceError(f"{where}: no such file" if what == "missing" else
                         f"{where} is not a file: a trace is an .npz file")
    if not zipfile.is_zipfile(path):
        raise TraceError(f"{where} is not a trace: a trace is the .npz archive `tuner trace "
                         "record` or `tuner trace import` writes; to bring a route log in, "
                         f"run `tuner trace import jsonl|vllm|csv {where} -o trace.npz`")
    try:
        names = check_headers(path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise TraceError(f"{where}: not a trace (.npz) file: {err}") from None
    if set(names) - set(ARRAYS) or "experts" not in names or "meta" not in names:
        raise TraceError(f"{where}: holds {sorted(names)}; a trace holds 'experts' and "
                         "'meta', optionally 'logits', 'stale' and 'probs'")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
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


def check_headers(path: Path) -> list[str]:
    """The names of the arrays of an .npz, once every array's header was read and found to
    describe the bytes stored for it (an array is allocated at the size its header gives
    before it is read, so a header claiming 2**48 tokens would otherwise fail as a
    MemoryError) and all of them to fit in this machine's memory. ValueError saying which
    array is wrong."""
    names, total = [], 0
    with zipfile.ZipFile(path) as z:
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
            names.append(name)
            total += claimed
    if total > memory_bytes():
        raise ValueError(f"its arrays take {total:,} bytes, more than this machine's "
                         f"{memory_bytes():,} bytes of memory")
    return names
