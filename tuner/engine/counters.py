"""Per-layer counters, cumulative and over a sliding window of tokens.

`COUNTERS` is the counter table: every UI column and every Prometheus series is generated
from it. `DERIVED` are the per-layer figures computed from the counts, `TOTALS` the
figures of a snapshot's totals, and `HEADLINES` the few of them every UI leads with (the
page's charts, the terminal's overview, the help and /metrics read the same table).
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
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from tuner.engine.expert_log import ExpertLog

if TYPE_CHECKING:  # the snapshot's types are built from this module's tables
    from tuner.engine.snapshot import LayerRow, Phases, Totals, Window


@dataclass(frozen=True)
class Column:
    name: str
    unit: str
    help: str


COUNTERS: tuple[Column, ...] = (
    Column("routings", "experts", "routed (token, layer, expert) choices"),
    Column("lookups", "experts", "(layer, expert) lookups in the arena: one per routing in "
           "decode (dropped ones included), one per expert of a prompt's union in batched "
           "prefill"),
    Column("hits", "experts", "lookups found resident in the arena"),
    Column("sync_misses", "experts", "lookups that missed: waited for a demand read, or with "
           "cpu_pool were computed at the link or CPU site"),
    Column("bypass", "experts", "misses computed from a staging buffer: no slot was eligible"),
    Column("pf_issued", "experts", "speculative reads issued for this layer"),
    Column("pf_cancelled", "experts", "speculation cancelled before any byte was read"),
    Column("pf_partial", "experts", "speculation cancelled after part of it was read"),
    Column("pf_unused", "experts", "speculation read completely and never claimed"),
    Column("pf_late", "experts", "speculation claimed while still in flight (its wait is stall)"),
    Column("pf_timely", "experts", "speculation claimed after it had completed"),
    Column("stall_ms", "ms", "time the layer waited for reads"),
    Column("layer_ms", "ms", "time spent in the layer's MoE block"),
    Column("warmup_ms", "ms", "time before the tokens that needed them capturing the layer's "
           "CUDA graphs and building their kernels (not in ms per token; 0 without a GPU)"),
    Column("bytes_demand", "bytes", "bytes read on demand"),
    Column("bytes_spec", "bytes", "bytes read speculatively"),
    Column("evictions", "experts", "experts of this layer evicted from the arena"),
    Column("h2d_ms", "ms", "copy-engine time uploading read experts to the device (CUDA "
           "events; 0 without a GPU)"),
    Column("bytes_h2d", "bytes", "bytes of read experts uploaded to the device (CUDA)"),
    Column("bytes_direct", "bytes", "bytes of misses a layer read in place from host "
           "memory, over the link on a GPU (expert_store = ram, miss_direct)"),
    Column("link_experts", "experts", "misses copied over the link and computed on the device"),
    Column("cpu_experts", "experts", "misses computed on the CPU from host RAM"),
    Column("vram_ms", "ms", "time computing resident experts (cpu_pool)"),
    Column("link_ms", "ms", "time of the link site: copies plus device compute (cpu_pool)"),
    Column("cpu_ms", "ms", "time of the CPU site (cpu_pool)"),
    Column("bytes_link", "bytes", "bytes copied over the link: link share and tier swaps"),
    Column("admissions", "experts", "link-fetched experts admitted into the arena"),
    Column("verified", "experts", "admitted slots read back and compared"),
    Column("mismatches", "experts", "admitted slots whose bytes differed from the expert's"),
    Column("tier_swaps", "experts", "experts the adaptive tier moved into the arena"),
    Column("prev_scored", "routings", "routings the prev-token predictor ranked"),
    Column("prev_slots", "experts", "routed experts the prev-token predictor named"),
    Column("prev_whole", "routings", "routings the prev-token predictor named exactly"),
    Column("stale_scored", "routings", "routings the stale-gate predictor ranked"),
    Column("stale_slots", "experts", "routed experts the stale-gate predictor named"),
    Column("stale_whole", "routings", "routings the stale-gate predictor named exactly"),
    Column("ctrl_scored", "routings", "routings the fresh-gate control ranked"),
    Column("ctrl_slots", "experts", "routed experts the fresh-gate control named"),
    Column("ctrl_whole", "routings", "routings the fresh-gate control named exactly"),
    Column("prompt_streamed", "experts", "prefill: experts of a prompt's ranked union streamed "
           "into the arena (up to prompt_max_pre per layer)"),
    Column("prompt_through", "experts", "prefill: experts of the union past the layer's cap, "
           "computed from a staging row and not kept"),
    Column("hot_fallbacks", "experts", "prefill: victims taken from the prompt-hot set when "
           "no other slot was eligible"),
    Column("checkres_windows", "windows", "residency checks (adapt_checkres): one per layer "
           "and token"),
    Column("checkres_mismatches", "experts", "experts whose router-visible residency differed "
           "from the arena's slot map at a check"),
    Column("dropped", "experts", "routed experts that missed with a routing weight below "
           "drop_cold: neither read nor computed"),
    Column("dropped_mass", "weight", "routing weight of the dropped experts (softmax over the "
           "selected top-k; each routing's weights sum to 1)"),
    Column("bytes_dropped", "bytes", "expert bytes not read because their expert was dropped"),
    Column("rerouted", "experts", "routed experts outside the exact top-k of the layer's own "
           "router (moce's resident bonus, a routing trace)"),
    # The quality probe's counts are per sampled token: they sit on the last layer's row,
    # the layer whose output the model's next-token distribution is.
    Column("q_tokens", "tokens", "tokens the quality probe compared with the exact output "
           "(every quality_every tokens; last layer's row)"),
    Column("q_agree", "tokens", "compared tokens whose served and exact top-1 agree"),
    Column("q_kl", "nats", "sum of KL(exact || served) of the next-token distributions"),
    Column("q_ms", "ms", "time of the quality probe's exact passes (not in layer_ms nor in "
           "ms per token)"),
    Column("q_bytes", "bytes", "bytes the quality probe read for its exact passes (not in "
           "the bytes read)"),
)
PHASES = ("prefill", "decode")  # the first dimension of every count
IDX = {c.name: i for i, c in enumerate(COUNTERS)}
PREDICTORS = ("prev", "stale", "ctrl")
PF_CLASSES = ("pf_cancelled", "pf_partial", "pf_unused", "pf_late", "pf_timely")

# Columns computed from the counts, shown beside them.
DERIVED: tuple[Column, ...] = (
    Column("hit_rate", "%", "hits / lookups"),
    Column("resident", "experts", "experts of this layer resident now (not windowed)"),
    Column("residency", "%", "resident / experts per layer (not windowed)"),
    Column("quota", "experts", "slots the layer may hold with arena_split = layers (- with one "
           "shared arena)"),
    Column("slot_gain", "%", "hit rate the layer would gain with one slot more than its quota "
           "(or than its resident experts, with one shared arena): its routings of the window "
           "replayed through LRU at both sizes (window, redone each quarter window)"),
    Column("cpu_fraction", "%", "cpu_experts / (cpu_experts + link_experts)"),
    *(Column(f"{p}_pct", "%", f"{p} predictor: routed experts named / routed experts scored "
             "(- where nothing was scored)") for p in PREDICTORS),
    *(Column(f"{p}_whole_pct", "%", f"{p} predictor: routings named exactly / scored")
      for p in PREDICTORS),
    # The counts above are sums over the window (or the run); these are per token.
    Column("layer_ms_per_token", "ms/token", "layer_ms / tokens: the layer's MoE block per "
           "token"),
    Column("stall_ms_per_token", "ms/token", "stall_ms / tokens: waiting for reads per token"),
    Column("sync_misses_per_token", "experts/token", "sync_misses / tokens"),
    Column("bytes_per_token", "bytes/token", "(bytes_demand + bytes_spec) / tokens"),
)

# The figures of a snapshot's totals besides the sums of every counter.
TOTALS: tuple[Column, ...] = (
    Column("tokens", "tokens", "tokens decoded"),
    Column("seconds", "s", "seconds spent decoding them"),
    Column("ms_per_token", "ms/token", "decode time per token"),
    Column("tok_s", "tokens/s", "tokens decoded per second"),
    Column("hit_rate", "%", "hits / lookups"),
    Column("sync_misses_per_token", "experts/token", "sync misses per token"),
    Column("bytes_read", "bytes", "bytes read, demand and speculative"),
    Column("bytes_per_token", "bytes/token", "bytes read per token, demand and speculative"),
    Column("spec_bytes_per_token", "bytes/token", "bytes read speculatively per token"),
    Column("read_gbps", "GB/s", "bytes read / decode seconds"),
    Column("h2d_gbps", "GB/s", "bytes uploaded to the device / copy-engine time (CUDA)"),
    Column("link_bytes_per_token", "bytes/token", "bytes copied over the link per token"),
    Column("cpu_fraction", "%", "cpu_experts / (cpu_experts + link_experts)"),
    Column("issue_usefulness", "%", "prefetch claimed (late or timely) / issued"),
    Column("timely_usefulness", "%", "prefetch claimed after its read completed / issued"),
    Column("pf_pending", "experts", "prefetch issued and not yet settled"),
    Column("resident", "experts", "experts resident in the arena now"),
    Column("residency", "%", "resident / layer-expert pairs"),
    *(c for c in DERIVED if c.name.startswith(PREDICTORS)),
    Column("prompts", "prompts", "prompts prefilled"),
    Column("ttft_ms", "ms", "time to first token: prefill time per prompt"),
    Column("dropped_per_token", "experts/token", "experts dropped (drop_cold) per token"),
    Column("dropped_mass_pct", "%", "routing weight dropped / routing weight routed (each "
           "routing of k experts carries 1)"),
    Column("bytes_dropped_per_token", "bytes/token", "expert bytes not read per token "
           "because their expert was dropped"),
    Column("rerouted_pct", "%", "rerouted / routings: routed experts outside the layer's "
           "exact top-k"),
    Column("top1_agreement", "%", "quality probe: tokens whose served top-1 equals the exact "
           "one / tokens compared (- when quality_every = 0)"),
    Column("quality_kl", "nats", "quality probe: mean KL(exact || served) of the next-token "
           "distribution per compared token"),
    Column("quality_ms", "ms", "quality probe: time of one exact pass, off the timed path "
           "(not in ms per token)"),
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


def _pct(num: float, den: float) -> float | None:
    return round(100.0 * float(num) / float(den), 2) if den else None


def _per_token(value: float, tokens: int) -> float | None:
    return round(value / tokens, 3) if tokens else None


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

    def add(self, layer: int, name: str, value: float = 1.0) -> None:
        self.cur[layer, IDX[name]] += value

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
                self._ring.append((self._cum.copy(), self._sums.copy()))
                self.per_expert.fold()
                self._slide()
        self.cur[:] = 0

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
            row: LayerRow = {"layer": layer}
            row.update({col.name: _round(c[i]) for i, col in enumerate(COUNTERS)})
            row["hit_rate"] = _pct(c[IDX["hits"]], c[IDX["lookups"]])
            row["resident"] = resident[layer]
            row["residency"] = _pct(resident[layer], self.experts)
            row["quota"] = None if quota is None else quota[layer]
            row["slot_gain"] = slot_gain[layer]
            row["cpu_fraction"] = _pct(c[IDX["cpu_experts"]],
                                       c[IDX["cpu_experts"]] + c[IDX["link_experts"]])
            for p in PREDICTORS:
                scored = c[IDX[f"{p}_scored"]]
                row[f"{p}_pct"] = _pct(c[IDX[f"{p}_slots"]], scored * self.top_k)
                row[f"{p}_whole_pct"] = _pct(c[IDX[f"{p}_whole"]], scored)
            row["layer_ms_per_token"] = _per_token(c[IDX["layer_ms"]], tokens)
            row["stall_ms_per_token"] = _per_token(c[IDX["stall_ms"]], tokens)
            row["sync_misses_per_token"] = _per_token(c[IDX["sync_misses"]], tokens)
            row["bytes_per_token"] = _per_token(c[IDX["bytes_demand"]] + c[IDX["bytes_spec"]],
                                                tokens)
            out.append(row)
        return out

    def totals(self, counts: np.ndarray, tokens: int, seconds: float,
               resident: list[int], prompts: int = 0, prefill_seconds: float = 0.0
               ) -> Totals:
        s = counts.sum(axis=0).tolist()
        t: Totals = {col.name: _round(s[i]) for i, col in enumerate(COUNTERS)}
        issued = s[IDX["pf_issued"]]
        useful = s[IDX["pf_late"]] + s[IDX["pf_timely"]]
        nbytes = s[IDX["bytes_demand"]] + s[IDX["bytes_spec"]]
        t.update({
            "tokens": tokens,
            "seconds": round(seconds, 4),
            "ms_per_token": round(1000 * seconds / tokens, 3) if tokens else None,
            "tok_s": round(tokens / seconds, 2) if seconds else None,
            "hit_rate": _pct(s[IDX["hits"]], s[IDX["lookups"]]),
            "sync_misses_per_token": round(s[IDX["sync_misses"]] / tokens, 3) if tokens else None,
            "bytes_read": int(nbytes),
            "bytes_per_token": round(nbytes / tokens) if tokens else None,
            "spec_bytes_per_token": round(s[IDX["bytes_spec"]] / tokens) if tokens else None,
            "read_gbps": round(nbytes / seconds / 1e9, 4) if seconds else None,
            "h2d_gbps": round(s[IDX["bytes_h2d"]] / s[IDX["h2d_ms"]] / 1e6, 4)
            if s[IDX["h2d_ms"]] else None,
            "link_bytes_per_token": round(s[IDX["bytes_link"]] / tokens) if tokens else None,
            "cpu_fraction": _pct(s[IDX["cpu_experts"]],
                                 s[IDX["cpu_experts"]] + s[IDX["link_experts"]]),
            "issue_usefulness": _pct(useful, issued),
            "timely_usefulness": _pct(s[IDX["pf_timely"]], issued),
            "pf_pending": _round(issued - sum(s[IDX[c]] for c in PF_CLASSES)),
            "resident": int(sum(resident)),
            "residency": _pct(sum(resident), self.experts * self.layers),
            "prompts": prompts,
            "ttft_ms": round(1000 * prefill_seconds / prompts, 3) if prompts else None,
        })
        for p in PREDICTORS:
            scored = s[IDX[f"{p}_scored"]]
            t[f"{p}_pct"] = _pct(s[IDX[f"{p}_slots"]], scored * self.top_k)
            t[f"{p}_whole_pct"] = _pct(s[IDX[f"{p}_whole"]], scored)
        compared = s[IDX["q_tokens"]]
        t.update({
            "dropped_per_token": _per_token(s[IDX["dropped"]], tokens),
            "dropped_mass_pct": _pct(s[IDX["dropped_mass"]], s[IDX["routings"]] / self.top_k),
            "bytes_dropped_per_token": round(s[IDX["bytes_dropped"]] / tokens) if tokens
            else None,
            "rerouted_pct": _pct(s[IDX["rerouted"]], s[IDX["routings"]]),
            "top1_agreement": _pct(s[IDX["q_agree"]], compared),
            # KL is often tiny: significant digits, not decimals
            "quality_kl": float(f"{s[IDX['q_kl']] / compared:.4g}") if compared else None,
            "quality_ms": round(s[IDX["q_ms"]] / compared, 3) if compared else None,
        })
        return t


def _round(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(float(x), 3)
