"""Per-layer counters, cumulative and over a sliding window of tokens.

`C` is the counter table, a typed handle per count (`COUNTERS` lists them): every UI column
and every Prometheus series is generated from it. `DERIVED` are the per-layer figures
computed from the counts and `TOTALS` the figures of a snapshot's totals, each carrying its
formula, so a layer row and the totals loop over one declaration; `HEADLINES` are the few
every UI leads with (the page's charts, the terminal's overview, the help and /metrics read
the same table).
Counts accumulate in a per-token scratch row owned by the decode thread and are folded
into the shared totals at each token boundary, under a lock held for microseconds; the
per-expert counts (`ExpertLog`) are folded in under the same lock.

The window is declared here, once, and every view reads it (the charts, the layer tables,
the heat map, the hit curves, the slot gains): the newest steps that hold the last
`window` tokens. A step is one decoded token or one prompt prefilled in a batch, whose
counts cannot be split by token, so a prompt is kept whole: the window holds `window`
tokens, or up to a prompt's length less one more while a prompt's step straddles its
start. Every view shows the window's measured token count, never the knob's value.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, cast

import numpy as np

from tuner.vocabulary.expert_log import ExpertLog

if TYPE_CHECKING:  # the snapshot's types are built from this module's tables
    from tuner.vocabulary.snapshot import LayerRow, Phases, Totals, Window


class Shown(Protocol):
    """What a view shows of a count or a figure: its name, unit and help (read-only: the
    tables' entries are frozen)."""

    @property
    def name(self) -> str: ...
    @property
    def unit(self) -> str: ...
    @property
    def help(self) -> str: ...


@dataclass(frozen=True)
class Heading:
    """A column a view shows that no count or formula gives (a layer's index)."""

    name: str
    unit: str
    help: str


class Count:
    """A counter of the table: a number per layer and phase, added to by the engine. Its
    name is the attribute of `C` it is declared as; `index` its place in a row of counts."""

    index = -1

    def __init__(self, unit: str, help: str):
        self.unit, self.help = unit, help

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name


class C:
    """The counter table, a handle per count: `counters.add(layer, C.hits)`, so a name that
    is not a counter fails the type check, never the decode thread."""

    routings = Count("experts", "routed (token, layer, expert) choices")
    lookups = Count("experts", "(layer, expert) lookups in the arena: one per routing in decode "
                               "(dropped ones included), one per expert of a prompt's union in "
                               "batched prefill")
    hits = Count("experts", "lookups found resident in the arena")
    sync_misses = Count("experts", "lookups that missed: waited for a demand read, or with "
                                   "cpu_pool were computed at the link or CPU site")
    bypass = Count("experts", "misses computed from a staging buffer: no slot was eligible")
    pf_issued = Count("experts", "speculative reads issued for this layer")
    pf_cancelled = Count("experts", "speculation cancelled before any byte was read")
    pf_partial = Count("experts", "speculation cancelled after part of it was read")
    pf_unused = Count("experts", "speculation read completely and never claimed")
    pf_late = Count("experts", "speculation claimed while still in flight (its wait is stall)")
    pf_timely = Count("experts", "speculation claimed after it had completed")
    stall_ms = Count("ms", "time the layer waited for reads")
    layer_ms = Count("ms", "time spent in the layer's MoE block")
    warmup_ms = Count("ms", "time before the tokens that needed them capturing the layer's CUDA "
                            "graphs and building their kernels (not in ms per token; 0 without a "
                            "GPU)")
    bytes_demand = Count("bytes", "bytes read on demand")
    bytes_spec = Count("bytes", "bytes read speculatively")
    evictions = Count("experts", "experts of this layer evicted from the arena")
    h2d_ms = Count("ms", "copy-engine time uploading read experts to the device (CUDA events; 0 "
                         "without a GPU)")
    bytes_h2d = Count("bytes", "bytes of read experts uploaded to the device (CUDA)")
    bytes_direct = Count("bytes", "bytes of misses a layer read in place from host memory, over "
                                  "the link on a GPU (miss_direct: the RAM store's copy, or "
                                  "the disk store's pinned buffers)")
    link_experts = Count("experts", "misses copied over the link and computed on the device")
    cpu_experts = Count("experts", "misses computed on the CPU from host RAM")
    vram_ms = Count("ms", "time computing resident experts (cpu_pool)")
    link_ms = Count("ms", "time of the link site: copies plus device compute (cpu_pool)")
    cpu_ms = Count("ms", "time of the CPU site (cpu_pool)")
    bytes_link = Count("bytes", "bytes copied over the link: link share and tier swaps")
    admissions = Count("experts", "link-fetched experts admitted into the arena")
    verified = Count("experts", "admitted slots read back and compared")
    mismatches = Count("experts", "admitted slots whose bytes differed from the expert's")
    tier_swaps = Count("experts", "experts the adaptive tier moved into the arena")
    prev_scored = Count("routings", "routings the prev-token predictor ranked")
    prev_slots = Count("experts", "routed experts the prev-token predictor named")
    prev_whole = Count("routings", "routings the prev-token predictor named exactly")
    stale_scored = Count("routings", "routings the stale-gate predictor ranked")
    stale_slots = Count("experts", "routed experts the stale-gate predictor named")
    stale_whole = Count("routings", "routings the stale-gate predictor named exactly")
    ctrl_scored = Count("routings", "routings the fresh-gate control ranked")
    ctrl_slots = Count("experts", "routed experts the fresh-gate control named")
    ctrl_whole = Count("routings", "routings the fresh-gate control named exactly")
    prompt_streamed = Count("experts", "prefill: experts of a prompt's ranked union streamed into "
                                       "the arena (up to prompt_max_pre per layer)")
    prompt_through = Count("experts", "prefill: experts of the union past the layer's cap, "
                                      "computed from a staging row and not kept")
    hot_fallbacks = Count("experts", "prefill: victims taken from the prompt-hot set when no other "
                                     "slot was eligible")
    checkres_windows = Count("windows", "residency checks (adapt_checkres): one per layer and "
                                        "token")
    checkres_mismatches = Count("experts", "experts whose router-visible residency differed from "
                                           "the arena's slot map at a check")
    dropped = Count("experts", "routed experts that missed with a routing weight below drop_cold: "
                               "neither read nor computed")
    dropped_mass = Count("weight", "routing weight of the dropped experts (softmax over the "
                                   "selected top-k; each routing's weights sum to 1)")
    bytes_dropped = Count("bytes", "expert bytes not read because their expert was dropped")
    rerouted = Count("experts", "routed experts outside the exact top-k of the layer's own router "
                                "(moce's resident bonus, a routing trace)")
    # The quality probe's counts are per sampled token: they sit on the last layer's row,
    # the layer whose output the model's next-token distribution is.
    q_tokens = Count("tokens", "tokens the quality probe compared with the exact output (every "
                               "quality_every tokens; last layer's row)")
    q_agree = Count("tokens", "compared tokens whose served and exact top-1 agree")
    q_kl = Count("nats", "sum of KL(exact || served) of the next-token distributions")
    q_ms = Count("ms", "time of the quality probe's exact passes (not in layer_ms nor in ms per "
                       "token)")
    q_bytes = Count("bytes", "bytes the quality probe read for its exact passes (not in the bytes "
                             "read)")


COUNTERS: tuple[Count, ...] = tuple(v for v in vars(C).values() if isinstance(v, Count))
for _index, _count in enumerate(COUNTERS):
    _count.index = _index
IDX = {c.name: c.index for c in COUNTERS}
Phase = Literal["prefill", "decode"]
PHASES: tuple[Phase, ...] = ("prefill", "decode")  # the first dimension of every count
PREDICTORS = ("prev", "stale", "ctrl")
PF_CLASSES = (C.pf_cancelled, C.pf_partial, C.pf_unused, C.pf_late, C.pf_timely)
# each predictor's counts: routings scored, routed experts named, routings named exactly
PROBE_COUNTS = {p: (COUNTERS[IDX[f"{p}_scored"]], COUNTERS[IDX[f"{p}_slots"]],
                    COUNTERS[IDX[f"{p}_whole"]]) for p in PREDICTORS}


@dataclass(frozen=True)
class Figures:
    """What a derived figure is computed from: counts (a layer's, or summed over the
    layers) and the facts beside them."""

    counts: list[float]  # by Count.index
    tokens: int
    resident: int  # the layer's residents now, or the arena's
    experts: int  # experts of a layer, or layer-expert pairs
    top_k: int
    seconds: float = 0.0
    prompts: int = 0
    prefill_seconds: float = 0.0
    quota: int | None = None
    slot_gain: float | None = None

    def __getitem__(self, count: Count) -> float:
        return self.counts[count.index]


Figure = float | int | None
Formula = Callable[[Figures], Figure]


@dataclass(frozen=True)
class Column:
    """A figure computed from the counts (`formula`), shown beside them."""

    name: str
    unit: str
    help: str
    formula: Formula


def _pct(num: float, den: float) -> float | None:
    return round(100.0 * float(num) / float(den), 2) if den else None


def _per_token(value: float, tokens: int) -> float | None:
    return round(value / tokens, 3) if tokens else None


def _whole_per_token(value: float, tokens: int) -> int | None:
    return round(value / tokens) if tokens else None


def _predictor(p: str) -> tuple[Column, Column]:
    scored, slots, whole = PROBE_COUNTS[p]
    return (Column(f"{p}_pct", "%", f"{p} predictor: routed experts named / routed experts "
                   "scored (- where nothing was scored)",
                   lambda f: _pct(f[slots], f[scored] * f.top_k)),
            Column(f"{p}_whole_pct", "%", f"{p} predictor: routings named exactly / scored",
                   lambda f: _pct(f[whole], f[scored])))


_HIT_RATE = Column("hit_rate", "%", "hits / lookups", lambda f: _pct(f[C.hits], f[C.lookups]))
_CPU_FRACTION = Column("cpu_fraction", "%", "cpu_experts / (cpu_experts + link_experts)",
                       lambda f: _pct(f[C.cpu_experts], f[C.cpu_experts] + f[C.link_experts]))
_PREDICTED = tuple(_predictor(p)[0] for p in PREDICTORS) + tuple(_predictor(p)[1]
                                                                  for p in PREDICTORS)

# Per-layer figures computed from the counts, shown beside them.
DERIVED: tuple[Column, ...] = (
    _HIT_RATE,
    Column("resident", "experts", "experts of this layer resident now (not windowed)",
           lambda f: f.resident),
    Column("residency", "%", "resident / experts per layer (not windowed)",
           lambda f: _pct(f.resident, f.experts)),
    Column("quota", "experts", "slots the layer may hold with arena_split = layers (- with one "
           "shared arena)", lambda f: f.quota),
    Column("slot_gain", "%", "hit rate the layer would gain with one slot more than its quota "
           "(or than its resident experts, with one shared arena): its routings of the window "
           "replayed through LRU at both sizes (window, redone each quarter window)",
           lambda f: f.slot_gain),
    _CPU_FRACTION,
    *_PREDICTED,
    # The counts above are sums over the window (or the run); these are per token.
    Column("layer_ms_per_token", "ms/token", "layer_ms / tokens: the layer's MoE block per "
           "token", lambda f: _per_token(f[C.layer_ms], f.tokens)),
    Column("stall_ms_per_token", "ms/token", "stall_ms / tokens: waiting for reads per token",
           lambda f: _per_token(f[C.stall_ms], f.tokens)),
    Column("sync_misses_per_token", "experts/token", "sync_misses / tokens",
           lambda f: _per_token(f[C.sync_misses], f.tokens)),
    Column("bytes_per_token", "bytes/token", "(bytes_demand + bytes_spec) / tokens",
           lambda f: _per_token(f[C.bytes_demand] + f[C.bytes_spec], f.tokens)),
)


def _read(f: Figures) -> float:
    return f[C.bytes_demand] + f[C.bytes_spec]


def _kl(f: Figures) -> float | None:  # KL is often tiny: significant digits, not decimals
    return float(f"{f[C.q_kl] / f[C.q_tokens]:.4g}") if f[C.q_tokens] else None


# The figures of a snapshot's totals besides the sums of every counter.
TOTALS: tuple[Column, ...] = (
    Column("tokens", "tokens", "tokens decoded", lambda f: f.tokens),
    Column("seconds", "s", "seconds spent decoding them", lambda f: round(f.seconds, 4)),
    Column("ms_per_token", "ms/token", "decode time per token",
           lambda f: round(1000 * f.seconds / f.tokens, 3) if f.tokens else None),
    Column("tok_s", "tokens/s", "tokens decoded per second",
           lambda f: round(f.tokens / f.seconds, 2) if f.seconds else None),
    _HIT_RATE,
    Column("sync_misses_per_token", "experts/token", "sync misses per token",
           lambda f: _per_token(f[C.sync_misses], f.tokens)),
    Column("bytes_read", "bytes", "bytes read, demand and speculative", lambda f: int(_read(f))),
    Column("bytes_per_token", "bytes/token", "bytes read per token, demand and speculative",
           lambda f: _whole_per_token(_read(f), f.tokens)),
    Column("spec_bytes_per_token", "bytes/token", "bytes read speculatively per token",
           lambda f: _whole_per_token(f[C.bytes_spec], f.tokens)),
    Column("read_gbps", "GB/s", "bytes read / decode seconds",
           lambda f: round(_read(f) / f.seconds / 1e9, 4) if f.seconds else None),
    Column("h2d_gbps", "GB/s", "bytes uploaded to the device / copy-engine time (CUDA)",
           lambda f: round(f[C.bytes_h2d] / f[C.h2d_ms] / 1e6, 4) if f[C.h2d_ms] else None),
    Column("link_bytes_per_token", "bytes/token", "bytes copied over the link per token",
           lambda f: _whole_per_token(f[C.bytes_link], f.tokens)),
    _CPU_FRACTION,
    Column("issue_usefulness", "%", "prefetch claimed (late or timely) / issued",
           lambda f: _pct(f[C.pf_late] + f[C.pf_timely], f[C.pf_issued])),
    Column("timely_usefulness", "%", "prefetch claimed after its read completed / issued",
           lambda f: _pct(f[C.pf_timely], f[C.pf_issued])),
    Column("pf_pending", "experts", "prefetch issued and not yet settled",
           lambda f: _round(f[C.pf_issued] - sum(f[c] for c in PF_CLASSES))),
    Column("resident", "experts", "experts resident in the arena now", lambda f: f.resident),
    Column("residency", "%", "resident / layer-expert pairs",
           lambda f: _pct(f.resident, f.experts)),
    *_PREDICTED,
    Column("prompts", "prompts", "prompts prefilled", lambda f: f.prompts),
    Column("ttft_ms", "ms", "time to first token: prefill time per prompt",
           lambda f: round(1000 * f.prefill_seconds / f.prompts, 3) if f.prompts else None),
    Column("dropped_per_token", "experts/token", "experts dropped (drop_cold) per token",
           lambda f: _per_token(f[C.dropped], f.tokens)),
    Column("dropped_mass_pct", "%", "routing weight dropped / routing weight routed (each "
           "routing of k experts carries 1)",
           lambda f: _pct(f[C.dropped_mass], f[C.routings] / f.top_k)),
    Column("bytes_dropped_per_token", "bytes/token", "expert bytes not read per token "
           "because their expert was dropped",
           lambda f: _whole_per_token(f[C.bytes_dropped], f.tokens)),
    Column("rerouted_pct", "%", "rerouted / routings: routed experts outside the layer's "
           "exact top-k", lambda f: _pct(f[C.rerouted], f[C.routings])),
    Column("top1_agreement", "%", "quality probe: tokens whose served top-1 equals the exact "
           "one / tokens compared (- when quality_every = 0)",
           lambda f: _pct(f[C.q_agree], f[C.q_tokens])),
    Column("quality_kl", "nats", "quality probe: mean KL(exact || served) of the next-token "
           "distribution per compared token", _kl),
    Column("quality_ms", "ms", "quality probe: time of one exact pass, off the timed path "
           "(not in ms per token)",
           lambda f: round(f[C.q_ms] / f[C.q_tokens], 3) if f[C.q_tokens] else None),
)


@dataclass(frozen=True)
class Headline:
    key: str  # a key of the snapshot's totals
    label: str

    @property
    def column(self) -> Column:
        return TOTAL_BY_NAME[self.key]


TOTAL_BY_NAME = {c.name: c for c in TOTALS}
HEADLINES: tuple[Headline, ...] = (
    Headline("ms_per_token", "ms per token"),
    Headline("hit_rate", "hit rate"),
    Headline("bytes_per_token", "bytes per token"),
    Headline("sync_misses_per_token", "sync misses per token"),
    Headline("issue_usefulness", "prefetch useful"),
    Headline("timely_usefulness", "prefetch timely"),
    Headline("top1_agreement", "top-1 agreement"),
    Headline("quality_kl", "KL exact || served"),
)


# The figures each UI shows per phase (prefill, decode), from the phases' totals.
PHASE_FIGURES = ("tokens", "ms_per_token", "tok_s", "hit_rate", "sync_misses_per_token",
                 "bytes_per_token", "prompts", "ttft_ms")


class Counters:
    def __init__(self, layers: int, experts: int, top_k: int, window: int,
                 keep: int | None = None):
        """`keep`: tokens of routing the expert log holds (default twice the window)."""
        self.layers, self.experts, self.top_k = layers, experts, top_k
        self.per_expert = ExpertLog(layers, experts, top_k, window, keep or 2 * window)
        self.cur = np.zeros((layers, len(COUNTERS)))  # this token, decode thread only
        self._lock = threading.Lock()
        self.window = window
        # per phase: counts [P, L, C], and tokens, seconds and prompts [3, P] at the end of
        # each step of the window; the first is the base the window's counts start from
        self._ring: deque[tuple[np.ndarray, np.ndarray]] = deque()
        self.ended, self._phase = 0, 0  # steps ended, and the last one's phase
        self.clear()

    def clear(self) -> None:
        """Back to zero (a counter reset, from the decode thread between tokens)."""
        self.cur[:] = 0
        with self._lock:
            self._cum = np.zeros((len(PHASES), *self.cur.shape))
            self._sums = np.zeros((3, len(PHASES)))  # tokens, seconds, prompts
            self._ring.clear()
            self._ring.append((self._cum.copy(), self._sums.copy()))
            self.per_expert.clear()

    def add(self, layer: int, count: Count, value: float = 1.0) -> None:
        self.cur[layer, count.index] += value

    def end_token(self, seconds: float, tokens: int = 1, phase: str = "decode",
                  prompts: int = 0) -> None:
        """Folds this step's counts into `phase`'s totals: one decoded token, or `tokens`
        prompt tokens prefilled (`prompts` = 1 when the step ended a prompt); tokens=0:
        counts settled between tokens, such as speculation drained at the end of a run."""
        p = PHASES.index(phase)
        with self._lock:
            self._cum[p] += self.cur
            self._sums[:, p] += (tokens, seconds, prompts)
            if tokens:
                self.ended, self._phase = self.ended + 1, p
                self._ring.append((self._cum.copy(), self._sums.copy()))
                self.per_expert.fold()
                self._slide()
        self.cur[:] = 0

    @contextmanager
    def late(self, ended: int) -> Iterator[None]:
        """Counts made inside belong to a step that ran before the open one (the engine
        counts a token's probe and layer times under the next token's first layers):
        `ended`, the steps ended when it ran. Once its step has ended they go to that step's
        phase, as if counted before it ended; until then to the open step."""
        now, self.cur = self.cur, np.zeros_like(self.cur)
        try:
            yield
        finally:
            late, self.cur = self.cur, now
            if self.ended == ended:
                self.cur += late
            else:
                with self._lock:  # the step's own entry, the last, so it leaves with it
                    self._cum[self._phase] += late
                    self._ring[-1][0][self._phase] += late

    def _slide(self) -> None:
        """Moves the window's start past the steps it no longer needs: a step leaves once
        the steps after it hold `window` tokens (the caller holds the lock)."""
        now = self._sums[0].sum()  # tokens (of every phase) so far
        # an entry is (counts, sums) at the end of a step; sums[0] its tokens by phase
        while len(self._ring) > 1 and now - self._ring[1][1][0].sum() >= self.window:
            self._ring.popleft()
            self.per_expert.leave()

    @property
    def tokens(self) -> int:
        with self._lock:
            return int(self._sums[0].sum())

    def read_phases(self, window: bool) -> tuple[np.ndarray, np.ndarray]:
        """(counts [phases, layers, counters], [tokens, seconds, prompts] x phases), whole
        run or window."""
        with self._lock:
            cum, sums = self._cum.copy(), self._sums.copy()
            base = self._ring[0] if window else None
        if base is None:
            return cum, sums
        return cum - base[0], sums - base[1]

    def read(self, window: bool, phase: str | None = None) -> tuple[np.ndarray, int, float]:
        """(counts [layers, counters], tokens, seconds) of one phase or both, whole run or
        window."""
        counts, sums = self.read_phases(window)
        pick = slice(None) if phase is None else slice(p := PHASES.index(phase), p + 1)
        return counts[pick].sum(axis=0), int(sums[0, pick].sum()), float(sums[1, pick].sum())

    def expert_counts(self, window: bool) -> tuple[np.ndarray, np.ndarray, int]:
        """(routings [L, E], sync misses [L, E], tokens), whole run or window."""
        with self._lock:
            return self.per_expert.counts(window)

    def routings(self) -> np.ndarray:
        """The expert log's routings, oldest first [T, L, K]."""
        with self._lock:
            return self.per_expert.routings()

    def window_routings(self) -> np.ndarray:
        """The routings of the window's tokens, oldest first [T, L, K], -1 for an empty
        slot (what live budgets and slot gains replay)."""
        with self._lock:
            routings, tokens = self.per_expert.routings(), self.per_expert.window_tokens
        return routings[len(routings) - tokens:]

    def view(self, window: bool, resident: list[int], quota: list[int] | None,
             slot_gain: list[float | None]) -> Window:
        """Tokens, totals and layer rows of both phases together, and each phase's totals:
        the snapshot's body, whole run or window."""
        counts, sums = self.read_phases(window)
        both, tokens = counts.sum(axis=0), int(sums[0].sum())
        return {
            "tokens": tokens,
            "totals": self.totals(both, tokens, float(sums[1].sum()), resident,
                                  int(sums[2].sum()), float(sums[1, 0])),
            "layers": self.rows(both, tokens, resident, quota, slot_gain),
            "phases": cast("Phases", {
                name: self.totals(counts[p], int(sums[0, p]), float(sums[1, p]), resident,
                                  int(sums[2, p]), float(sums[1, 0]))
                for p, name in enumerate(PHASES)}),
        }

    def rows(self, counts: np.ndarray, tokens: int, resident: list[int],
             quota: list[int] | None, slot_gain: list[float | None]) -> list[LayerRow]:
        out = []
        # Python floats: indexing a numpy array element by element costs more than the rest
        for layer, c in enumerate(counts.tolist()):
            f = Figures(c, tokens, resident[layer], self.experts, self.top_k,
                        quota=None if quota is None else quota[layer],
                        slot_gain=slot_gain[layer])
            out.append({"layer": layer, **{col.name: _round(c[col.index]) for col in COUNTERS},
                        **{col.name: col.formula(f) for col in DERIVED}})
        return out

    def totals(self, counts: np.ndarray, tokens: int, seconds: float,
               resident: list[int], prompts: int = 0, prefill_seconds: float = 0.0
               ) -> Totals:
        s = counts.sum(axis=0).tolist()
        f = Figures(s, tokens, int(sum(resident)), self.experts * self.layers, self.top_k,
                    seconds, prompts, prefill_seconds)
        return {**{col.name: _round(s[col.index]) for col in COUNTERS},
                **{col.name: col.formula(f) for col in TOTALS}}


def _round(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(float(x), 3)
