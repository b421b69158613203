"""Importers for route logs as other engines and papers publish them, so an operator can
bring real traffic without reshaping it by hand. Every odd row, and everything dropped,
ends up in the import report (see `assemble`), which is printed even when an import fails.

`tuner trace import FORMAT SRC...`: each SRC is a file, a folder (its files of the
format) or a glob; several make one trace, in natural name order.

* `jsonl`: one JSON object per line, one line per token and layer, e.g.
  `{"dataset": "gsm8k", "problem_id": 0, "layer": 0, "experts": [7, 0],
  "gating_probs": [0.80, 0.20], "token_idx": 0}`. Lines may come token-major or
  layer-major. Sequences come from an id field (`problem_id`, `req_id`, `request_id`,
  `seq_id`, `sequence`, or the one `--sequence-key` names; with `dataset` when a row has
  one), else from token indices that go back. Gate weights are kept from `gating_probs`,
  `probs`, `weights`, `topk_weights`, `router_probs` (or `--probs-key`). Fields the
  importer does not use are named in the report.
* `csv`: a header row (names matched ignoring case, spaces and underscores), then one row
  per routing with `layer` (`layer id`), `token` and `experts` (`expert ids`, `activated
  expert ids`: ids separated by spaces, `;`, `|` or commas inside quotes, brackets
  allowed), or one row per activated expert with `expert` (`expert id`). A token index
  (`token_idx`, `step`, `position`, or a `token` column of integers) that goes back
  starts a new sequence; a `token` column holding the tokens' text gives positions by row
  order, per layer. Each file is a sequence of its
  own: a folder of one CSV per prompt, such as `Layer ID,Batch Number,Token,Activated
  Expert IDs` with layer ids from 1 and rows layer-major, imports as one trace.
* `vllm`: a folder of `moe_layer{N}.jsonl` files (or one such file) as vLLM's MoE route
  logger writes them: a first line `{"type": "meta", "model_id", "top_k",
  "layers_logged", "num_experts"?}`, then `{"type": "route", "req_id", "token_idx",
  "layer", "topk_ids", "topk_weights"}`. The logger numbers `token_idx` within a forward
  batch, so it restarts with every batch: first come warm-up and profiling batches, then
  one prefill batch (all prompts concatenated), then decode batches of B rows, row i
  being request i. The importer finds the phases from the batch sizes and by default
  keeps the decode phase as one sequence per request (`--phase decode|prefill|all`).
  A log whose token_idx never restarts (one batch, as loggers that count tokens themselves
  write) is one sequence in file order; its leading rows routed exactly alike at every
  layer, vLLM's dummy warm-up run, are dropped.

What is read is bounded: regular files only, 512 MiB for all the files of one import
together and 1 MiB a line (tuner.vocabulary.inputs.ROUTE_LOGS), 2**22 lines in all
(MAX_LINES), 128 KiB a CSV field. An import holds one line at a time and the routings read
(docs/security.md gives what that takes, measured).
"""

from __future__ import annotations

import csv
import glob
import json
import re
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from tuner.traces.assemble import Problems, Routing, Sequencer, assemble
from tuner.vocabulary import inputs
from tuner.vocabulary.trace_format import MAX_EXPERTS, Trace, TraceError

SEQUENCE_KEYS = ("problem_id", "req_id", "request_id", "seq_id", "sequence")
PROBS_KEYS = ("gating_probs", "probs", "weights", "topk_weights", "router_probs")
JSONL_KEYS = {
    "layer": ("layer", "layer_id"),
    "token": ("token_idx", "token", "position"),
    "experts": ("experts", "topk_ids", "expert_ids"),
}
CSV_COLUMNS = {
    "layer": ("layer", "layerid"),
    "token": ("token", "tokenidx", "step", "position"),
    "experts": ("experts", "expertids", "activatedexpertids", "topkids"),
    "expert": ("expert", "expertid"),
}
PHASES = ("decode", "prefill", "all")
# Lines an import reads in all its files: each makes at most one routing, held until the
# trace is made (0.4 KiB for one expert, 0.8 KiB for top-8 with gate weights).
MAX_LINES = 1 << 22
_lines_left: ContextVar[list[int]] = ContextVar("lines_left")  # of the import running

# leading identical routings that make a dummy warm-up run (vLLM's are a batch of at least
# hundreds of tokens)
WARMUP_ROWS = 64


class ImportFailed(TraceError):
    """An import that made no trace; `report` holds what was read up to the failure."""

    def __init__(self, message: str, report: dict, notes: list[str]):
        super().__init__(message)
        self.report, self.notes = report, notes


@dataclass
class Options:
    num_experts: int | None = None
    sequence_key: str | None = None
    probs_key: str | None = None
    phase: str = "decode"


@dataclass
class Source:
    """What a reader gives `assemble`: rows, trace meta and lines for the report."""

    routings: list[Routing]
    meta: dict
    notes: list[str]


def _natural(path: Path) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def expand(srcs: list[Path], suffix: str) -> list[Path]:
    """The files SRC arguments name: files as given, folders' `*suffix` files, globs."""
    files: list[Path] = []
    for src in srcs:
        what = inputs.kind(src)
        if what == "folder":
            found = sorted(src.glob(f"*{suffix}"), key=_natural)
            if not found:
                raise TraceError(f"{src}: no {suffix} files in the folder")
        elif what != "missing":  # a file, or something else that opening it refuses
            found = [src]
        else:
            found = sorted((Path(p) for p in glob.glob(str(src))), key=_natural)
            if not found:
                raise TraceError(f"{src}: no such file or folder, and no file matches it")
        files.extend(found)
    return list(dict.fromkeys(files))


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


def _log_lines(path: Path, count: bool = True) -> Iterator[tuple[int, bytes]]:
    """The lines of route log `path`, within inputs.ROUTE_LOGS and, when they `count` (a
    pass that keeps nothing does not), the import's MAX_LINES."""
    left = _lines_left.get(None) or [MAX_LINES]
    for n, line in inputs.read_lines(path, inputs.ROUTE_LOGS):
        left[0] -= count
        if left[0] < 0:
            raise TraceError(f"{path.name}:{n}: over {MAX_LINES:,} lines read; an import "
                             f"reads at most {MAX_LINES:,} lines of route logs in all (each "
                             "routing read is held until the trace is made)")
        yield n, line


def _json_lines(path: Path, problems: Problems) -> Iterator[tuple[str, dict]]:
    for n, line in _log_lines(path):
        where = f"{path.name}:{n}"
        if not line.strip():
            continue
        try:
            obj = inputs.loads(line)
        except json.JSONDecodeError as err:
            problems.add("unreadable", f"{where}: not JSON ({err.msg})")
            continue
        if not isinstance(obj, dict):
            problems.add("unreadable", f"{where}: a JSON object is expected")
            continue
        yield where, obj


def _text_lines(path: Path, count: bool = True) -> Iterator[str]:
    """The lines of `path` as text, one at a time; TraceError at one that is not UTF-8."""
    for n, line in _log_lines(path, count):
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise TraceError(f"{path.name}:{n}: not UTF-8 text ({err.reason}); a route log "
                             "is UTF-8 text") from None


def _parsed(where: str, problems: Problems, needs: str, parse):
    """parse()'s value, or None when a field is missing or bad (reported as unreadable)."""
    try:
        return parse()
    except KeyError as err:
        problems.add("unreadable", f"{where}: no {err.args[0]!r}; {needs}")
    except (TypeError, ValueError, OverflowError) as err:  # overflow: a float beyond 1e308
        problems.add("unreadable", f"{where}: {err}")
    return None


def _first(obj: dict, names: tuple[str, ...]) -> str | None:
    return next((n for n in names if n in obj), None)


class _Fields:
    """Which of a row's fields the importer uses; the others are reported once each."""

    def __init__(self, problems: Problems):
        self.problems = problems
        self.reported: set[str] = set()

    def unused(self, where: str, fields, used: set[str]) -> None:
        for name in fields:
            if name not in used and name not in self.reported:
                self.reported.add(name)
                self.problems.add("ignored_field", f"{where}: {name!r}")


def read_jsonl(files: list[Path], problems: Problems, opts: Options) -> Source:
    routings: list[Routing] = []
    fields = _Fields(problems)
    seq_names = (opts.sequence_key,) if opts.sequence_key else SEQUENCE_KEYS
    probs_names = (opts.probs_key,) if opts.probs_key else PROBS_KEYS
    with_ids = Counter()
    labels: dict[tuple, tuple] = {}  # one tuple per sequence, shared by its rows
    for number, path in enumerate(files):
        sequencer = Sequencer(problems)  # token indices going back: new sequences
        for where, obj in _json_lines(path, problems):
            names = {k: _first(obj, v) for k, v in JSONL_KEYS.items()}
            seq_name, probs_name = _first(obj, seq_names), _first(obj, probs_names)

            def parse(obj=obj, names=names, probs_name=probs_name):
                missing = [v[0] for k, v in JSONL_KEYS.items() if names[k] is None]
                if missing:
                    raise KeyError(missing[0])
                layer = _int(obj[names["layer"]], names["layer"])
                token = _int(obj[names["token"]], names["token"])
                if layer < 0 or token < 0:
                    raise ValueError("layer and token index must be >= 0")
                probs = _floats(obj[probs_name], probs_name) if probs_name else None
                return layer, token, _ints(obj[names["experts"]], names["experts"]), probs

            row = _parsed(where, problems, "a row has layer, token_idx and experts", parse)
            if row is None:
                continue
            layer, token, experts, probs = row
            used = {*names.values(), seq_name, probs_name}
            if seq_name is not None:
                used.add("dataset")
                label = ("id", json.dumps(obj.get("dataset")), json.dumps(obj[seq_name]))
                key = (labels.setdefault(label, label), token)
                with_ids[seq_name] += 1
            else:
                sequence, token = sequencer.key(layer, token, where)
                label = ("file", number, sequence)
                key = (labels.setdefault(label, label), token)
            fields.unused(where, obj, used)
            routings.append(Routing(where, key, layer, experts, probs))
    notes = [f"sequences from the {name!r} field ({n} rows)" for name, n in with_ids.items()]
    return Source(routings, {"source": _named("jsonl", files)}, notes)


def _named(fmt: str, files: list[Path]) -> str:
    return f"{fmt} {files[0].name}" + (f" and {len(files) - 1} more" if len(files) > 1 else "")


def _normal(name: str) -> str:
    return re.sub(r"[\s_]+", "", name).lower()


def _columns(fields: list[str] | None, path: Path) -> dict[str, str]:
    """Our column name -> the file's, for the columns it has."""
    given = {_normal(f): f for f in fields or []}
    found = {ours: given[alias] for ours, aliases in CSV_COLUMNS.items()
             for alias in aliases if alias in given}
    if "layer" not in found or "token" not in found or not (
            "experts" in found or "expert" in found):
        raise TraceError(f"{path}: columns {list(fields or [])}; a routing CSV needs a header "
                         "with layer, token, and experts (one row per routing) or expert "
                         "(one row per activated expert), matched ignoring case, spaces and "
                         "underscores; aliases: " + "; ".join(
                             f"{k}: {', '.join(v)}" for k, v in CSV_COLUMNS.items()))
    return found


def _id_list(text: str) -> list[int]:
    parts = [p for p in re.split(r"[\s;|,]+", text.strip().strip("[]")) if p]
    return [int(p) for p in parts]


def _is_int(text: str) -> bool:
    return text.strip().lstrip("-").isdigit()


def _csv_rows(path: Path, count: bool = True
              ) -> tuple[list[str] | None, Iterator[tuple[str, dict]]]:
    """The header of CSV `path` and its rows as (where, row), read a row at a time;
    TraceError at a row the csv module cannot read."""
    reader = csv.DictReader(_text_lines(path, count))

    def refused(err: csv.Error) -> TraceError:  # a field over its limit of 128 KiB, ...
        line = reader.reader.line_num  # the row being read (the DictReader's is the last)
        return TraceError(f"{path.name}:{line}: not a CSV row ({err}); a field holds at "
                          f"most {csv.field_size_limit():,} characters")

    def rows() -> Iterator[tuple[str, dict]]:
        try:
            for row in reader:
                yield f"{path.name}:{reader.line_num}", row
        except csv.Error as err:
            raise refused(err) from None

    try:
        return reader.fieldnames, rows()
    except csv.Error as err:
        raise refused(err) from None


def read_csv(files: list[Path], problems: Problems, opts: Options) -> Source:
    routings: list[Routing] = []
    notes: list[str] = []
    fields = _Fields(problems)
    labels: dict[tuple, tuple] = {}  # one tuple per sequence, shared by its rows
    texts = 0
    for number, path in enumerate(files):
        names, rows = _csv_rows(path)
        col = _columns(names, path)
        fields.unused(f"{path.name}:1", [c for c in names or () if c not in col.values()],
                      set())
        long_form = "experts" not in col
        # A `token` column of text (not indices): positions by row order, per layer. Found
        # by a first pass, so the rows are never all held at once.
        by_order = _normal(col["token"]) == "token" and any(
            row[col["token"]] is not None and not _is_int(row[col["token"]])
            for _, row in _csv_rows(path, count=False)[1])
        texts += by_order
        sequencer, position = Sequencer(problems), Counter()
        group: tuple[int, int] | None = None  # (layer, token) of the routing being gathered
        for where, row in rows:
            try:
                if any(row[c] is None for c in col.values()):
                    raise ValueError(f"{len(names or ())} columns expected")
                layer = int(row[col["layer"]])
                ids = [int(row[col["expert"]])] if long_form else _id_list(row[col["experts"]])
                token = None if by_order else int(row[col["token"]])
                if layer < 0 or (token is not None and token < 0):
                    raise ValueError("layer and token must be >= 0")
            except ValueError as err:
                problems.add("unreadable", f"{where}: {err}")
                continue
            if long_form and group == (layer, token if token is not None else row[col["token"]]):
                routings[-1].experts.extend(ids)
                continue
            group = (layer, token if token is not None else row[col["token"]])
            if by_order:
                sequence, token = 0, position[layer]
                position[layer] += 1
            else:
                sequence, token = sequencer.key(layer, token, where)
            label = labels.setdefault(("file", number, sequence), ("file", number, sequence))
            routings.append(Routing(where, (label, token), layer, ids))
    if texts:
        notes.append(f"{texts} of {len(files)} file(s) hold token text, not indices: "
                     "positions from row order, per layer")
    return Source(routings, {"source": _named("csv", files)}, notes)


@dataclass
class _Route:
    where: str
    request: str  # req_id as JSON text: any JSON value names a request, lists too
    experts: list[int]
    probs: list[float] | None


def _batches(rows: list[tuple[int, _Route]]) -> list[list[_Route]]:
    """One layer's route lines split into forward batches where token_idx restarts."""
    batches: list[list[_Route]] = []
    last = None
    for token, route in rows:
        if last is None or token <= last:
            batches.append([])
        batches[-1].append(route)
        last = token
    return batches


@dataclass(frozen=True)
class Round:
    """One run of requests: its prefill batch (None when the log starts in decode) and its
    decode batches, indices into the batch list."""

    prefill: int | None
    decode: range


def _dummy(batches: list[list[_Route]]) -> bool:
    """vLLM's profiling and graph-capture runs feed dummy tokens, so every row of such a
    batch routes alike at every layer; no real batch of two or more rows does."""
    return all(len(b) > 1 and all(r.experts == b[0].experts for r in b) for b in batches)


def leading_dummy(batches: dict[int, list[list[_Route]]]) -> int:
    """Rows at the start of a log with one forward batch that are vLLM's dummy warm-up run:
    the run of rows routed exactly like the first at every layer (its dummy tokens route
    alike), when it is at least WARMUP_ROWS long, so a prompt opening on a repeated token is
    not taken for one; 0 otherwise."""
    firsts = [bs[0] for bs in batches.values()]
    run = 0
    while all(run < len(rows) and rows[run].experts == rows[0].experts for rows in firsts):
        run += 1
    return run if run >= WARMUP_ROWS else 0


def phases(sizes: list[int], dummy: list[bool] | None = None) -> tuple[int, list[Round]]:
    """(decode batch size B, the rounds) from the batch sizes and which batches are dummy
    runs. B is the most common size of the other batches (decode steps dominate a run).
    From the end back, a round is a run of decode batches of at most B rows that never
    grows, after the larger batch that prefilled it; rounds are taken back to the first
    batch that is neither. Dummy batches and everything before the first round are
    warm-up; a log with no prefilled round keeps its last decode run."""
    dummy = dummy or [False] * len(sizes)
    real = [i for i in range(len(sizes)) if not dummy[i]]
    if not real:
        return 0, []
    counts = Counter(sizes[i] for i in real)
    B = max(counts, key=lambda s: (counts[s], -s))
    rounds: list[Round] = []
    end = len(real)
    while end > 0:
        first = end
        while first > 0 and sizes[real[first - 1]] <= B and (
                first == end or sizes[real[first - 1]] >= sizes[real[first]]):
            first -= 1
        prefilled = first > 0 and sizes[real[first - 1]] > B
        if first == end or (rounds and not prefilled):
            break
        rounds.append(Round(real[first - 1] if prefilled else None,
                            range(real[first], real[end - 1] + 1)))
        if not prefilled:
            break
        end = first - 1
    return B, rounds[::-1]


def _requests_by_id(batches: list[list[_Route]]) -> bool:
    """Whether req_id names the request of a decode row: the ids tell each batch's rows
    apart and come back in later batches (loggers that number forward calls give each
    batch an id of its own; real batched runs often log one id for everything)."""
    ids = [[r.request for r in b] for b in batches]
    if not ids or any(len(set(b)) != len(b) for b in ids):
        return False
    seen = Counter(i for b in ids for i in set(b))
    return any(n > 1 for n in seen.values())


def _phase_notes(sizes: list[int], dummy: list[bool], B: int, rounds: list[Round]
                 ) -> list[str]:
    kept = {i for r in rounds for i in (*r.decode, *([r.prefill] if r.prefill is not None
                                                     else []))}
    notes = [f"{len(sizes)} forward batches (token_idx restarts): "
             f"{len(sizes) - len(kept)} warm-up ({sum(dummy)} of them dummy runs, every row "
             f"routed alike), {len(rounds)} round(s) of requests, decode batches of up to "
             f"{B} rows"]
    for n, r in enumerate(rounds):
        prefill = (f"a prefill of {sizes[r.prefill]} rows" if r.prefill is not None
                   else "no prefill")
        notes.append(f"round {n}: {prefill}, {len(r.decode)} decode steps of "
                     f"{sizes[r.decode[0]]} requests")
        steps = list(r.decode)
        for a, b in zip(steps, steps[1:]):
            if sizes[b] != sizes[a]:
                notes.append(f"round {n}: decode batch size {sizes[a]} -> {sizes[b]} at "
                             f"decode step {b - r.decode[0]}: from there row i is taken as "
                             "request i (the log does not say which request ended)")
    return notes


def read_vllm(files: list[Path], problems: Problems, opts: Options) -> Source:
    meta: dict = {"source": _named("vllm route logs", files)}
    notes: list[str] = []
    by_layer: dict[int, list[tuple[int, _Route]]] = {}
    for path in files:
        for where, obj in _json_lines(path, problems):
            kind = obj.get("type", "route")
            if kind == "meta":
                if obj.get("model_id"):
                    meta["model"] = obj["model_id"]
                if isinstance(obj.get("num_experts"), int):
                    meta["num_experts"] = obj["num_experts"]
                continue

            def parse(obj=obj, kind=kind):
                if kind != "route":
                    raise ValueError(f"type {kind!r}; expected 'meta' or 'route'")
                probs = (_floats(obj["topk_weights"], "topk_weights")
                         if "topk_weights" in obj else None)
                return (_int(obj["layer"], "layer"), _int(obj["token_idx"], "token_idx"),
                        _ints(obj["topk_ids"], "topk_ids"), probs)

            row = _parsed(where, problems, "a route line has layer, token_idx, topk_ids", parse)
            if row is None:
                continue
            layer, token, experts, probs = row
            by_layer.setdefault(layer, []).append(
                (token, _Route(where, json.dumps(obj.get("req_id")), experts, probs)))
    if not by_layer:
        raise TraceError(f"{meta['source']}: no route lines found")
    batches = {layer: _batches(rows) for layer, rows in sorted(by_layer.items())}
    first_layer = next(iter(batches))
    sizes = [len(b) for b in batches[first_layer]]
    for layer, bs in batches.items():
        if [len(b) for b in bs] != sizes:
            notes.append(f"layer {layer} has {len(bs)} batches of other sizes than layer "
                         f"{first_layer}'s {len(sizes)}: batches matched by their order")
    if len(sizes) == 1:  # no forward batch can be told from another
        notes.append("token_idx never restarts, so the log's forward batches (warm-up, "
                     "prefill, decode steps) cannot be told apart: its rows are kept in file "
                     "order as one sequence")
        skip = leading_dummy(batches)
        if skip:
            notes.append(f"its first {skip} rows route exactly alike at every layer: vLLM's "
                         "dummy warm-up run, dropped")
            problems.add("warmup", f"{batches[first_layer][0][0].where}: the first {skip} "
                         "rows, routed alike", skip * len(batches))
        routings = [Routing(r.where, (("log",), i), layer, r.experts, r.probs)
                    for layer, bs in batches.items() for i, r in enumerate(bs[0]) if i >= skip]
        return Source(routings, meta, notes)
    dummy = [_dummy([bs[i] for bs in batches.values() if i < len(bs)])
             for i in range(len(sizes))]
    B, rounds = phases(sizes, dummy)
    notes += _phase_notes(sizes, dummy, B, rounds)
    phase_of: dict[int, tuple[str, int]] = {}  # batch -> (phase, round)
    for n, r in enumerate(rounds):
        if r.prefill is not None:
            phase_of[r.prefill] = ("prefill", n)
        phase_of.update({i: ("decode", n) for i in r.decode})
    decode = [b for bs in batches.values() for i, b in enumerate(bs)
              if phase_of.get(i, ("",))[0] == "decode"]
    by_id = _requests_by_id(decode)
    routings: list[Routing] = []
    for layer, bs in batches.items():
        for index, batch in enumerate(bs):
            phase, n = phase_of.get(index, ("warm-up", -1))
            if phase == "warm-up" or (opts.phase != "all" and phase != opts.phase):
                problems.add("warmup" if phase == "warm-up" else "other_phase",
                             f"{batch[0].where}: {phase} batch {index}, {len(batch)} rows",
                             len(batch))
                continue
            for row, route in enumerate(batch):
                if phase == "prefill":
                    key = (("prefill", n), row)
                else:  # one stream per request
                    step = index - rounds[n].decode[0]
                    key = (("request", n, route.request if by_id else row), step)
                routings.append(Routing(route.where, key, layer, route.experts, route.probs))
    if opts.phase != "decode" and any(r.prefill is not None for r in rounds):
        notes.append("a prefill batch holds every prompt of its round concatenated; the log "
                     "does not say where one ends, so each is one sequence")
    return Source(routings, meta, notes)


FORMATS = {"jsonl": (read_jsonl, ".jsonl"), "csv": (read_csv, ".csv"),
           "vllm": (read_vllm, ".jsonl")}


def import_trace(fmt: str, srcs: list[Path] | Path, opts: Options | None = None,
                 model: str | None = None, expert_bytes: int = 0) -> Trace:
    """The trace of SRCs; raises ImportFailed (with the report so far) when none is made."""
    if fmt not in FORMATS:
        raise TraceError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if opts is not None and opts.phase not in PHASES:
        raise TraceError(f"phase {opts.phase!r}: expected one of {', '.join(PHASES)}")
    if opts is not None and opts.num_experts is not None and not (
            1 <= opts.num_experts <= MAX_EXPERTS):
        raise TraceError(f"num_experts {opts.num_experts}: a trace has 1 to {MAX_EXPERTS:,} "
                         "experts per layer")
    opts = opts or Options()
    reader, suffix = FORMATS[fmt]
    problems, notes = Problems(), []
    budget = _lines_left.set([MAX_LINES])
    try:
        try:
            files = expand([Path(s) for s in ([srcs] if isinstance(srcs, (str, Path))
                                              else srcs)], suffix)
            inputs.within(files, inputs.ROUTE_LOGS)
            source = reader(files, problems, opts)
        except inputs.PathError as err:  # a file of another kind, over a limit, ...
            raise TraceError(str(err)) from None
        except OSError as err:  # a file that failed while it was read
            raise TraceError(f"{err.filename or 'a route log'}: cannot be read as {fmt}: "
                             f"{err.strerror or err}") from None
        notes = source.notes
        meta = {**source.meta, "expert_bytes": expert_bytes, "import_notes": notes}
        if model:
            meta["model"] = model
        num_experts = opts.num_experts or meta.pop("num_experts", None)
        return assemble(source.routings, problems, meta, num_experts)
    except ImportFailed:
        raise
    except TraceError as err:
        raise ImportFailed(str(err), problems.as_dict(), notes) from None
    finally:
        _lines_left.reset(budget)
