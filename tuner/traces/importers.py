"""Importers for the route logs other engines and papers publish, so an operator can bring
real traffic. Every odd row ends up in the trace's import report (see `assemble`).

Formats (`tuner trace import FORMAT SRC`):

* `jsonl`: one JSON object per line, one line per token and layer:
  `{"layer": 3, "token_idx": 17, "experts": [5, 1, 9, 2], "probs": [0.4, 0.3, 0.2, 0.1]}`;
  `probs` (gate probabilities, rank-aligned) is optional. Lines may come token-major or
  layer-major; a token index that goes back at a layer starts a new sequence.
* `vllm`: a folder of JSON-lines files, one per layer, as the flag-gated vLLM MoE route
  loggers write them (a `VLLM_LOG_MOE` hook in `FusedMoE.select_experts`, one file per
  logged layer such as `moe_layer8.jsonl`): an optional first line
  `{"type": "meta", "model_id": ..., "layers_logged": [8], "top_k": 4, ...}`, then one line
  per token `{"type": "route", "req_id": "r1", "token_idx": 0, "layer": 8,
  "topk_ids": [...], "topk_weights": [...]}`. Such a logger numbers `token_idx` within
  one forward batch, so it restarts with every batch; tokens are therefore aligned across
  layers by order (the n-th route line of a layer is the n-th token), each restart is
  reported, and a change of `req_id` starts a new sequence.
* `csv`: a header row, then either one row per routing with columns `layer`, `token` and
  `experts` (ids separated by spaces, `;`, `|` or quoted commas, brackets allowed), or one
  row per activated expert with `layer`, `token` and `expert` (consecutive rows of one
  token and layer form its routing, in row order). Accepted column aliases: `layer_id`;
  `token_idx`, `step`; `expert_ids`; `expert_id`.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from tuner.traces.assemble import Problems, Routing, Sequencer, assemble
from tuner.engine.trace_format import Trace, TraceError

CSV_COLUMNS = {
    "layer": ("layer", "layer_id"),
    "token": ("token", "token_idx", "step"),
    "experts": ("experts", "expert_ids"),
    "expert": ("expert", "expert_id"),
}


def _int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    return value


def _ints(value, name: str) -> list[int]:
    if not isinstance(value, list):
        raise TypeError(f"{name} must be a list of integers, got {value!r}")
    return [_int(v, name) for v in value]


def _floats(value, name: str) -> list[float]:
    if not isinstance(value, list) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise TypeError(f"{name} must be a list of numbers, got {value!r}")
    return [float(v) for v in value]


def _json_lines(path: Path, problems: Problems) -> Iterator[tuple[str, dict]]:
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            where = f"{path.name}:{n}"
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                problems.add("unreadable", f"{where}: not JSON ({err.msg})")
                continue
            if not isinstance(obj, dict):
                problems.add("unreadable", f"{where}: a JSON object is expected")
                continue
            yield where, obj


def read_jsonl(src: Path, problems: Problems) -> tuple[list[Routing], dict]:
    routings, seq = [], Sequencer(problems)
    for where, obj in _json_lines(src, problems):
        try:
            layer, token = _int(obj["layer"], "layer"), _int(obj["token_idx"], "token_idx")
            experts = _ints(obj["experts"], "experts")
            probs = _floats(obj["probs"], "probs") if "probs" in obj else None
            if layer < 0 or token < 0:
                raise ValueError("layer and token_idx must be >= 0")
        except KeyError as err:
            problems.add("unreadable", f"{where}: no {err}; a row has layer, token_idx, experts")
            continue
        except (TypeError, ValueError) as err:
            problems.add("unreadable", f"{where}: {err}")
            continue
        routings.append(Routing(where, seq.key(layer, token, where), layer, experts, probs))
    return routings, {"source": f"jsonl {src.name}"}


def _natural(path: Path) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def read_vllm(src: Path, problems: Problems) -> tuple[list[Routing], dict]:
    if not src.is_dir():
        raise TraceError(f"{src}: the vllm format is a folder of per-layer .jsonl files")
    files = sorted(src.glob("*.jsonl"), key=_natural)
    if not files:
        raise TraceError(f"{src}: no .jsonl files in the folder")
    routings, meta = [], {"source": f"vllm route logs {src.name}/ ({len(files)} files)"}
    position: Counter[int] = Counter()  # route lines seen per layer: the token order
    sequence: Counter[int] = Counter()
    last_token: dict[int, int] = {}
    last_request: dict[int, object] = {}
    for path in files:
        for where, obj in _json_lines(path, problems):
            kind = obj.get("type", "route")
            if kind == "meta":
                if obj.get("model_id"):
                    meta["model"] = obj["model_id"]
                continue
            try:
                if kind != "route":
                    raise ValueError(f"type {kind!r}; expected 'meta' or 'route'")
                layer, token = _int(obj["layer"], "layer"), _int(obj["token_idx"], "token_idx")
                experts = _ints(obj["topk_ids"], "topk_ids")
                probs = (_floats(obj["topk_weights"], "topk_weights")
                         if "topk_weights" in obj else None)
            except KeyError as err:
                problems.add("unreadable", f"{where}: no {err}; a route line has layer, "
                             "token_idx, topk_ids")
                continue
            except (TypeError, ValueError) as err:
                problems.add("unreadable", f"{where}: {err}")
                continue
            if layer in last_token and token <= last_token[layer]:
                problems.add("restart", f"{where}: layer {layer} token_idx {token} after "
                             f"{last_token[layer]}")
            request = obj.get("req_id")
            if layer in last_request and request != last_request[layer]:
                sequence[layer] += 1
            last_token[layer], last_request[layer] = token, request
            key = (sequence[layer], position[layer])
            position[layer] += 1
            routings.append(Routing(where, key, layer, experts, probs))
    return routings, meta


def _columns(fields: list[str] | None, src: Path) -> dict[str, str]:
    """Our column name -> the file's, for the columns it has."""
    given = {f.strip().lower(): f for f in fields or []}
    found = {ours: given[alias] for ours, aliases in CSV_COLUMNS.items()
             for alias in aliases if alias in given}
    if "layer" not in found or "token" not in found or not (
            "experts" in found or "expert" in found):
        raise TraceError(f"{src}: columns {sorted(given)}; a routing CSV needs a header with "
                         "layer, token, and experts (one row per routing) or expert (one row "
                         "per activated expert); aliases: " + "; ".join(
                             f"{k}: {', '.join(v)}" for k, v in CSV_COLUMNS.items()))
    return found


def _id_list(text: str) -> list[int]:
    parts = [p for p in re.split(r"[\s;|,]+", text.strip().strip("[]")) if p]
    return [int(p) for p in parts]


def read_csv(src: Path, problems: Problems) -> tuple[list[Routing], dict]:
    routings, seq = [], Sequencer(problems)
    with open(src, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        col = _columns(reader.fieldnames, src)
        long_form = "experts" not in col
        group: tuple[int, int] | None = None  # (layer, token) of the routing being gathered
        for row in reader:
            where = f"{src.name}:{reader.line_num}"
            try:
                if any(row[c] is None for c in col.values()):
                    raise ValueError(f"{len(reader.fieldnames)} columns expected")
                layer, token = int(row[col["layer"]]), int(row[col["token"]])
                ids = [int(row[col["expert"]])] if long_form else _id_list(row[col["experts"]])
                if layer < 0 or token < 0:
                    raise ValueError("layer and token must be >= 0")
            except ValueError as err:
                problems.add("unreadable", f"{where}: {err}")
                continue
            if long_form and group == (layer, token):
                routings[-1].experts.extend(ids)
                continue
            group = (layer, token)
            routings.append(Routing(where, seq.key(layer, token, where), layer, ids))
    return routings, {"source": f"csv {src.name}"}


FORMATS = {"jsonl": read_jsonl, "vllm": read_vllm, "csv": read_csv}


def import_trace(fmt: str, src: Path, num_experts: int | None = None, model: str | None = None,
                 expert_bytes: int = 0) -> Trace:
    if fmt not in FORMATS:
        raise TraceError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    src = Path(src)
    if not src.exists():
        raise TraceError(f"{src}: no such file or folder")
    problems = Problems()
    try:
        routings, meta = FORMATS[fmt](src, problems)
    except (OSError, UnicodeDecodeError) as err:
        raise TraceError(f"{src}: cannot be read as {fmt}: {err}") from None
    if model:
        meta["model"] = model
    meta["expert_bytes"] = expert_bytes
    return assemble(routings, problems, meta, num_experts)
