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
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ARRAYS = ("experts", "logits", "stale", "probs", "meta")
SCORES = ("logits", "stale")  # optional float arrays [T, L, E]


class TraceError(ValueError):
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
        n = self.meta.get("num_experts")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise TraceError(f"{where}: meta 'num_experts' must be an integer >= 1, got {n!r}")
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
        T, L, K = ex.shape
        for name, arr, shape in (("logits", self.logits, (T, L, n)),
                                 ("stale", self.stale, (T, L, n)),
                                 ("probs", self.probs, (T, L, K))):
            if arr is not None and arr.shape != shape:
                raise TraceError(f"{where}: '{name}' has shape {arr.shape}; with experts "
                                 f"{ex.shape} and num_experts {n} it must be {shape}")


def save(trace: Trace, path: Path) -> None:
    trace.check(str(path))
    arrays = {"experts": trace.experts.astype(np.int32), "meta": np.array(json.dumps(trace.meta))}
    for name in (*SCORES, "probs"):
        arr = getattr(trace, name)
        if arr is not None:
            arrays[name] = arr.astype(np.float32)
    with open(path, "wb") as f:  # a file object, so numpy does not append ".npz"
        np.savez_compressed(f, **arrays)


def load(path: Path) -> Trace:
    where = str(path)
    if Path(path).is_file() and not zipfile.is_zipfile(path):
        raise TraceError(f"{where} is not a trace: a trace is the .npz archive `tuner trace "
                         "record` or `tuner trace import` writes; to bring a route log in, "
                         f"run `tuner trace import jsonl|vllm|csv {where} -o trace.npz`")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
    except FileNotFoundError:
        raise TraceError(f"{where}: no such file") from None
    except (OSError, ValueError, zipfile.BadZipFile) as err:
        raise TraceError(f"{where}: not a trace (.npz) file: {err}") from None
    unknown = sorted(set(arrays) - set(ARRAYS))
    if unknown or "experts" not in arrays or "meta" not in arrays:
        raise TraceError(f"{where}: holds {sorted(arrays)}; a trace holds 'experts' and "
                         "'meta', optionally 'logits', 'stale' and 'probs'")
    try:
        meta = json.loads(str(arrays["meta"]))
    except json.JSONDecodeError as err:
        raise TraceError(f"{where}: 'meta' is not JSON: {err}") from None
    if not isinstance(meta, dict):
        raise TraceError(f"{where}: 'meta' must be a JSON object, got {type(meta).__name__}")
    trace = Trace(arrays["experts"], meta, arrays.get("logits"), arrays.get("probs"),
                  arrays.get("stale"))
    trace.check(where)
    return trace
