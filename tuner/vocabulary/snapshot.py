"""The snapshot's shape, typed once: what `Session.snapshot` returns, `/api/snapshot`
answers (as its response model), the websockets send and the UIs and /metrics read.

A layer row and the totals carry one key per entry of the counter tables, so their types
are built from those tables; a counter added there is typed here with no edit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, cast

# pydantic reads TypedDicts only from typing_extensions before Python 3.12 (torch, which
# the engine needs anyway, depends on it)
from typing_extensions import TypedDict

from tuner.vocabulary.counters import COUNTERS, DERIVED, TOTALS

State = Literal["running", "paused", "error"]
Count = int | float  # a count is an int; a time or an average a float
Figure = int | float | None  # None: nothing to measure it over (a rate of zero lookups)

if TYPE_CHECKING:  # a type checker cannot read keys built at run time: to it, plain dicts
    LayerRow = dict[str, Figure]
    Totals = dict[str, Figure]
else:
    LayerRow = TypedDict("LayerRow", {
        "layer": int, **{c.name: Count for c in COUNTERS}, **{c.name: Figure for c in DERIVED}})
    Totals = TypedDict("Totals", {
        **{c.name: Count for c in COUNTERS}, **{c.name: Figure for c in TOTALS}})


def layer_of(row: LayerRow) -> int:
    """A row's layer, an int: to a type checker every key of a row is a figure."""
    return cast(int, row["layer"])


class Phases(TypedDict):
    """The totals of each phase; the snapshot's totals are both together."""

    prefill: Totals
    decode: Totals


class Window(TypedDict):
    tokens: int
    totals: Totals
    layers: list[LayerRow]
    phases: Phases


class WorkloadInfo(TypedDict):
    name: str
    conversations: int  # in the workload (it cycles)
    turn: int  # of the current conversation, from 1


class ModelInfo(TypedDict):
    name: str
    path: str
    arch: str
    layers: int
    experts: int
    top_k: int
    expert_bytes: int


class Arena(TypedDict):
    slots: int
    policy: str
    bytes: int
    split: Literal["global", "layers"]  # one arena, or a quota per layer (arena_split)


class Text(TypedDict):
    prompt: str
    output: str
    conversation: int


class Change(TypedDict):
    version: int
    token: int
    changed: dict[str, list[Any]]  # knob -> [old, new]
    rebuilt: bool
    rejected: str | None


class Snapshot(TypedDict):
    schema: int
    seq: int
    engine_version: str
    state: State
    error: str | None
    settings_version: int
    pending_version: int | None
    settings: dict[str, Any]
    model: ModelInfo
    device: str
    arena: Arena
    tokens: int
    conversations: int
    workload: WorkloadInfo
    output_hash: str
    totals: Totals
    layers: list[LayerRow]
    phases: Phases
    window: Window
    text: Text | None
    notes: list[str]
    changes: list[Change]


class Experts(TypedDict):
    """Per (layer, expert): `Session.experts`, `/api/experts`."""

    view: Literal["window", "cumulative"]
    tokens: int
    layers: int
    experts: int
    routings: list[list[int]]  # [L][E]
    misses: list[list[int]]  # [L][E] sync misses
    resident: list[list[int]] | None  # [L][E] 1 = resident; None until the first map
    resident_at_token: int | None
