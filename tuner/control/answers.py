"""The control plane's answers, typed once: what an operation returns besides the requests
and states of `models` and the engine's snapshot types (tuner.vocabulary.snapshot).

The data the rooms below hand up (a knob's entry, a preset, a plan of budgets, a curve, an
A/B's run, a tune's trial) is a TypedDict, as the snapshot is: plain JSON, served as it is
by the REST API, read back as its declared type by the remote backend and indexed alike by
the views whichever backend they run on. A job's status is its request's model extended
by its progress, so a field added to the request is in the answer with no edit here.
tests/control/test_answers.py checks that what the Controller returns has exactly the keys
declared here.
"""

# No `from __future__ import annotations`: a TypedDict tells its optional keys
# (NotRequired, total=False) from annotations it can evaluate, and so does pydantic.
from typing import Annotated, Any, Literal, NotRequired

from pydantic import Field

# pydantic reads TypedDicts only from typing_extensions before Python 3.12
from typing_extensions import TypedDict

from tuner.control.models import ABRequest, KnobValue, TuneSpec


class KnobInfo(TypedDict):
    """One entry of the knob table (`Knob.as_dict`)."""

    name: str
    env: str
    type: str
    kind: Literal["flag", "choice", "int", "float", "text"]
    default: KnobValue
    min: int | float | None
    max: int | float | None
    off: int | float | None
    choices: list[str] | None
    unit: str
    group: str
    restart: bool
    help: str
    seed: str
    allowed: str
    search: list[KnobValue] | None


# -- presets -------------------------------------------------------------------------------
class PresetBody(TypedDict):
    name: str
    meta: dict[str, Any]  # [preset] of its file: description, created, based_on, ...
    knobs: dict[str, KnobValue]
    shipped: bool


class PresetInfo(TypedDict):
    """A preset as the list shows it; a broken file is listed with its error."""

    name: str
    shipped: bool | None
    meta: dict[str, Any]
    knobs: dict[str, KnobValue]
    error: Annotated[str | None, Field(description="why the file cannot be used, with its "
                                                   "line")]


class KnobDiff(TypedDict):
    """A knob whose value differs between two settings."""

    knob: str
    env: str
    a: KnobValue
    b: KnobValue


# -- per-layer budgets ---------------------------------------------------------------------
class LayerQuota(TypedDict):
    layer: int
    quota: int
    even: int  # its share of an even split
    lookups: int
    hits: int  # at its quota, replayed
    hits_even: int
    gain_per_slot: int  # hits one more slot would add
    weight: float  # what one hit is worth there: 1, or the stall of a miss (ms)


class Replayed(TypedDict):
    hits: int
    hit_rate: float | None
    misses_per_token: float
    stall_ms: NotRequired[float]  # weighed by stall: what the misses left would cost


class Budgets(TypedDict):
    """Per-layer quotas from the window's routings (tuner.traces.budgets.plan), replayed
    in one shared arena ("global"), an even split ("even") and these quotas
    ("budgets")."""

    model: str | None
    num_experts: int
    layers_count: int
    tokens: int
    slots: int
    working_set: int
    working_sets: float
    weights: str
    quotas: list[int]
    layers: list[LayerQuota]
    replay: dict[str, Replayed]
    notes: list[str]
    version: NotRequired[int]  # the settings version that runs them, once applied


# -- the live hit curve --------------------------------------------------------------------
class NextSize(TypedDict):
    slots: Annotated[int, Field(description="the next arena size of the curve")]
    added: Annotated[int, Field(description="slots more than now")]
    gain_pp: Annotated[float, Field(description="hit-rate points the running policy gains "
                                                "there")]


class Curve(TypedDict, total=False):
    """The live hit curves (tuner.traces.curve); `error` alone when the computation
    failed."""

    arena: Annotated[int, Field(description="the arena's slots now")]
    policy: Annotated[str, Field(description="the running cache policy")]
    live_hit_rate: Annotated[float | None, Field(description="the engine's own window hit "
                                                             "rate")]
    settings_version: int
    at_token: Annotated[int, Field(description="tokens decoded when the routing was read")]
    window: Annotated[int, Field(description="tokens of the window")]
    sizes: Annotated[list[int], Field(description="arena sizes replayed")]
    working_set: Annotated[int, Field(description="one token's routings (layers x top-k)")]
    working_sets: Annotated[list[float], Field(description="each size in working sets")]
    hit_rate: Annotated[dict[str, list[float | None]],
                        Field(description="policy (lru, 2q, opt) -> hit rate % at each size")]
    tokens: Annotated[int, Field(description="tokens counted (the window's)")]
    warmup_tokens: Annotated[int, Field(description="older tokens replayed first to warm the "
                                                    "arena, not counted")]
    at_arena: Annotated[dict[str, float | None],
                        Field(description="each policy at the current arena")]
    gap_pp: Annotated[float | None, Field(description="Belady's bound minus the running "
                                                      "policy at the current arena")]
    next: NextSize | None
    notes: list[str]
    seconds: Annotated[float, Field(description="time the replays took")]
    error: str


# -- jobs ----------------------------------------------------------------------------------
Figure = int | float | None  # None: not measured (no decoded token, no quality probe)


class PhaseFigures(TypedDict):
    """What the rules read from one phase of a run (tuner.measure.ab)."""

    tokens: int
    sync_misses_per_token: Figure
    hits_per_token: Figure
    stall_ms_per_token: Figure
    ms_per_token: Figure
    quality_kl: Figure
    top1_agreement: Figure


class RunFigures(TypedDict):
    """What one run of an A/B measured (tuner.measure.ab.run_once)."""

    ms_per_token: float
    hit_rate: Figure
    sync_misses: int
    bytes_per_token: Figure
    output_hash: str
    quality_kl: Figure
    top1_agreement: Figure
    model: str
    arena_slots: int
    phases: dict[str, PhaseFigures]


class ABRun(RunFigures):
    """One run of an A/B: a fresh session of one arm on one workload."""

    run: int
    arm: Literal["A", "B"]
    workload: str


# -- an A/B's result: what tuner.measure.ab.run_ab writes, tuner.control.report and the
# page read. Its timings are compared by tuner.measure.compare, its rules judged by
# tuner.measure.rules.
Sign = Literal["B slower", "B faster", "equal"]  # of B - A


class PairDiff(TypedDict):
    pair: int  # from 1
    a: float  # ms per token of the pair's A
    b: float
    diff: float  # B - A
    pct: float | None  # of A's; None when A's is 0
    sign: Sign


class Timings(TypedDict):
    """What timings in schedule order (A B ... A) read: the pairs, the drift between the
    first A and the sentinel, the spread, and whether a difference is readable."""

    pair_diffs: list[PairDiff]
    diff: float  # mean B - A, ms per token
    diff_pct: float | None
    drift: float  # sentinel A - first A
    drift_pct: float | None
    pair_stdev: float | None  # None with one pair
    spread: float
    readable: bool
    verdict: str


class ArmTimings(TypedDict):
    runs: list[float]  # ms per token, in the order they ran
    mean: float
    stdev: float | None  # None with one run


class Compared(Timings):
    """`tuner.measure.compare.compare`'s answer: the timings and each arm's."""

    arms: dict[str, ArmTimings]  # "A", "B"


# A counter over an arm's runs: its value where every run agrees, else every run's.
Repeated = Figure | list[Figure]


class Repeats(TypedDict):
    """The counters an arm's runs must repeat (tuner.measure.ab.REPEATED)."""

    differ: list[str]  # the counters that did not repeat
    hit_rate: Repeated
    sync_misses: int | list[int]
    bytes_per_token: Repeated
    output_hash: str | list[str]
    quality_kl: Repeated
    top1_agreement: Repeated
    identical: bool  # every counter repeated


class Arm(ArmTimings, Repeats):
    """One arm on one workload: its timings and the counters its runs repeat."""


class WorkloadResult(Timings):
    """The runs of one workload, compared."""

    workload: str
    runs: list[ABRun]
    arms: dict[str, Arm]  # "A", "B"


class RuleOutcome(TypedDict):
    """A rule of tuner.measure.rules on one workload and phase."""

    workload: str
    phase: str
    rule: str
    status: Literal["pass", "reject", "n/a"]
    reason: str  # in numbers
    arm: str  # the arm a rejection rejects: "A", "B" or "A and B"


class ABResult(WorkloadResult):
    """An A/B's result: its first workload's comparison at the top (the figures a single
    workload's report reads), with `runs` every run, `workloads` each one's comparison,
    the rules' outcomes and the verdict of them all."""

    pairs: int
    tokens: int
    warmup_runs: int
    start_state: str
    model: str
    arena_slots: dict[str, int]  # "A", "B"
    knob_diff: list[KnobDiff]
    workloads: list[WorkloadResult]
    rules: str  # the rule set's name, "+ quality" with the gate; "" for timing only
    outcomes: list[RuleOutcome]
    rejected: bool  # a rule rejected an arm
    notes: list[str]
    interrupted: bool  # stopped once every run was measured: the verdict stands


class ABStatus(ABRequest):
    """An A/B as the API answers it: its request, then its progress."""

    total_runs: int
    state: Literal["running", "done", "failed"] = "running"
    runs: list[ABRun] = []
    result: ABResult | None = None
    error: str | None = None


class TuneTrial(TypedDict):
    """A trial of a tune as the CLI, the API and the page show it (tuner.tune.study)."""

    number: int
    state: str  # optuna's: running, complete, pruned, fail
    worker: str | None
    params: dict[str, KnobValue]
    score_pct: float | None  # its objective against its paired baseline, in %
    bytes_per_token: Figure
    ms_per_token: Figure
    stall_ms_per_token: Figure
    hit_rate: Figure
    quality_kl: Figure
    top1_agreement: Figure
    baseline_ms_per_token: Figure
    baseline_index: int | None
    baseline_values: bool  # the trial ran the baseline's own values (the noise floor)
    rejected: str | None  # why its guards rejected it


class TuneStatus(TuneSpec):
    """A tune as the API answers it: what it measures, then its trials. `space` is what
    each knob ranged over, pinned knobs included (=value)."""

    study: str
    storage: str
    sentinel_every: int
    state: Literal["running", "stopping", "done", "stopped", "failed"] = "running"
    running: int | None = None  # the trial being measured now
    rows: list[TuneTrial] = []
    front: list[int] = []  # trial numbers on the Pareto front
    error: str | None = None
    space: dict[str, str]
    done: int = 0  # trials finished
    best: TuneTrial | None = None  # the fastest trial of the front so far
