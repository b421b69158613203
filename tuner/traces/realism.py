"""Whether a decision made on one routing transfers to another: a trace's shape figures
and policy ranking beside the model's own routing and public route logs.

For each routing (a column): the shape figures of `tuner trace stats` that decide cache
behaviour (popularity: top-10 % share, Gini, pairs never routed; temporal reuse: the
prev-token overlap, its token-shuffled baseline, their difference, and the overlap at the
first layer alone), the hit rate of every replay mode (modes.py) at 15, 25 and 50 % of the
layer-expert pairs, each size also in working sets, and how each layer's LRU hit rate
goes with depth (Spearman's rank correlation of the per-layer hit rates with the layer
order, at each size). A trace of one layer reads nothing ahead (layer 0 never is), so its
read-ahead modes are not measured. Three kinds of column:

* the traces given (an operator's own routing, imported or recorded);
* the model's own routing: the demo model's figures as measured when it was made
  (data/demo_routing.json, with the command that measured them), or a recording given;
* public route logs (data/public_routing.json): figures only, with their sources.

Rankings are compared size by size with Kendall's tau-b over the policies both columns
measured; the verdicts an operator acts on (pin or LRU, 2Q or LRU, read ahead or not) are
spelled out where a trace and the model's routing disagree, and counted over the public
logs. A trace shorter than SETTLED_TOKENS gets a warning: below that, prefixes of the demo
model's own recording give other verdicts than the whole of it.

The shipped figures are written by `write_model` and `write_public` (`tuner realism TRACE
--write-model` / `--write-public NAME`), from a trace measured here, so they carry this
version's definitions.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau, spearmanr

from tuner.knobs import BY_NAME
from tuner.traces.modes import MODES
from tuner.traces.replay import pct, replay_rows
from tuner.traces.sizes import in_working_sets, pairs
from tuner.traces.stats import trace_stats
from tuner.vocabulary.trace_format import Trace, TraceError

SHARES_PCT = (15, 25, 50)  # arena sizes, % of the layer-expert pairs (as the public figures)
# (key in trace_stats' totals, label, decimals)
SHAPE = (("top10_share", "top-10 % experts' share of routings, %", 1),
         ("gini", "Gini of routing counts", 3),
         ("unrouted_pct", "layer-expert pairs never routed, %", 1),
         ("prev_pct", "prev-token slot overlap, %", 1),
         ("prev_shuffled_pct", "  the same, tokens shuffled, %", 1),
         ("prev_temporal_pp", "  temporal: overlap - shuffled, pp", 1),
         ("prev_first_pct", "  at the first layer alone, %", 1))
NAMES = {"lru": "LRU", "2q": "two-hit LRU", "opt": "Belady's bound",
         "static": "pinning the most-routed pairs",
         "static_half": "pinning the first half's most-routed pairs",
         "lru+prev": "reading ahead the previous token's routing",
         "lru+oracle": "reading ahead the exact routing"}
# (policy, the policy it is weighed against): the choices an operator makes
VERDICTS = (("static", "lru"), ("static_half", "lru"), ("2q", "lru"), ("lru+prev", "lru"),
            ("lru+oracle", "opt"))
TIE_PP = 0.5  # closer than this, two policies are as good as each other
# Below this many tokens, prefixes of the demo model's own 2,000-token recording give
# verdicts opposite to the whole recording's (`tuner realism` on its first 128 ... 1,536
# tokens). v5's routing drifts with the conversation's domain, so pinning from the first
# half of a shorter trace holds up better than over the whole recording: that verdict is
# opposite on every prefix up to 1,280 tokens and at 15 % on 1,536; the others agree from
# 128 tokens (v4's settled from 768, v3's from 1,024)
SETTLED_TOKENS = 2000
DEMO_FILE, PUBLIC_FILE = "demo_routing.json", "public_routing.json"


@dataclass
class Routing:
    """One column: a routing's figures."""

    name: str
    kind: str  # trace, model or public
    source: str
    tokens: int
    layers: int
    top_k: int
    experts: int
    shape: dict[str, float | None]
    slots: list[int]
    hit_rate: dict[str, list[float | None]]  # mode -> hit % at each of SHARES_PCT
    phase: str | None = None  # decode or prefill, where the source says
    working_sets: list[float] = field(default_factory=list)
    label: str = ""  # a short name for table heads (the name when empty)
    # per-layer LRU hit rate against depth, Spearman, at each of SHARES_PCT (None: one
    # layer, or not measured)
    depth_rho: list[float | None] = field(default_factory=list)

    @property
    def short(self) -> str:
        return self.label or self.name

    def ranking(self, i: int) -> list[str]:
        """Its policies, best first, at size i."""
        return sorted(self.hit_rate, key=lambda p: -(self.hit_rate[p][i] or 0.0))


def measure(trace: Trace, name: str, kind: str = "trace") -> Routing:
    """A trace's column: its shape figures and every mode replayed at SHARES_PCT (the
    read-ahead modes only where there is a next layer to read)."""
    stats = trace_stats(trace, caches=())
    shape = {key: stats["totals"].get(key) for key, _, _ in SHAPE}
    shape["prev_first_pct"] = stats["layers"][0]["prev_pct"]
    slots = [max(1, round(pairs(trace) * s / 100)) for s in SHARES_PCT]
    rows, starts = trace.rows(), trace.sequence_starts
    runs = {mode: [replay_rows(rows, trace.layers, mode, n, starts=starts) for n in slots]
            for mode, m in MODES.items() if trace.layers > 1 or not m.reads_ahead}
    hit_rate = {mode: [pct(r.hits.sum(), r.lookups.sum()) for r in rs]
                for mode, rs in runs.items()}
    meta = trace.meta
    source = " · ".join(str(v) for v in (meta.get("model"), meta.get("source")) if v)
    return Routing(name, kind, source or "-", trace.tokens, trace.layers, trace.top_k,
                   trace.num_experts, shape, slots, hit_rate,
                   working_sets=[in_working_sets(n, trace) for n in slots],
                   depth_rho=[depth_rho(r.hits, r.lookups) for r in runs["lru"]])


def depth_rho(hits: np.ndarray, lookups: np.ndarray) -> float | None:
    """Spearman's rank correlation of the per-layer hit rates with the layer order: below
    0, deeper layers hit less (None: one layer, or every layer alike)."""
    rates = hits / np.maximum(lookups, 1)
    if len(rates) < 2 or np.ptp(rates) == 0:
        return None
    return round(float(spearmanr(np.arange(len(rates)), rates).statistic), 2)


def _path(name: str) -> Path:
    return Path(str(resources.files("tuner.traces").joinpath("data", name)))


def _load(name: str) -> dict:
    return json.loads(_path(name).read_text())


def _column(doc: dict, kind: str) -> Routing:
    ws = doc["layers"] * doc["top_k"]
    return Routing(doc["name"], kind, doc["source"], doc["tokens"], doc["layers"],
                   doc["top_k"], doc["experts"], doc["shape"], doc["slots"], doc["hit_rate"],
                   doc.get("phase"), [round(n / ws, 2) for n in doc["slots"]],
                   doc.get("label", ""), doc.get("depth_rho", []))


MEASURED = ("tokens", "layers", "top_k", "experts", "shape", "slots", "hit_rate", "depth_rho")


def _measured(r: Routing) -> dict:
    """A column's measured fields as the shipped files hold them."""
    return {key: getattr(r, key) for key in MEASURED}


def recorded_at(meta: dict) -> str:
    """The settings a recording was made at, from its meta (which keeps the knobs that
    differ from their defaults)."""
    settings = meta.get("settings") or {}
    return (", ".join(f"{k}={v}" for k, v in settings.items())
            or f"the default settings (workload {BY_NAME['workload'].default}, seed "
            f"{BY_NAME['seed'].default}, temperature {BY_NAME['temperature'].default})")


def write_model(r: Routing, meta: dict, measured_with: str) -> Path:
    """The demo model's shipped figures, from `r`, a recording whose meta is `meta`."""
    from tuner.vocabulary.recipes import DEFAULT

    model = meta.get("model")
    if model != DEFAULT.id:
        raise TraceError(f"the trace is a recording of {model!r}; the shipped figures are "
                         f"the demo model's, {DEFAULT.id!r}: record that one")
    doc = _load(DEMO_FILE)
    doc.update(model=model, measured_with=measured_with, **_measured(r),
               source=f"{model}, {r.tokens:,} tokens at {recorded_at(meta)}")
    path = _path(DEMO_FILE)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def write_public(r: Routing, name: str, measured_with: str) -> Path:
    """The shipped figures of the public log `name`, from `r`, the log as imported."""
    doc = _load(PUBLIC_FILE)
    names = [log["name"] for log in doc["logs"]]
    if name not in names:
        raise TraceError(f"no public log named {name!r}; the shipped ones: {', '.join(names)}")
    log = doc["logs"][names.index(name)]
    log.update(**_measured(r), measured_with=measured_with)
    log.pop("not_measured", None)
    doc["definitions"]["modes"] = {mode: m.help for mode, m in MODES.items()}
    path = _path(PUBLIC_FILE)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def public_logs() -> list[Routing]:
    return [_column(log, "public") for log in _load(PUBLIC_FILE)["logs"]]


def demo_routing() -> tuple[Routing, dict]:
    """The demo model's column as shipped, and the file (model id, how it was measured)."""
    doc = _load(DEMO_FILE)
    return _column(doc, "model"), doc


def decode_range(public: list[Routing]) -> dict[str, tuple[float, float] | None]:
    """Each shape figure's min and max over the public decode logs that measured it."""
    out: dict[str, tuple[float, float] | None] = {}
    for key, _, _ in SHAPE:
        seen = [v for p in public if p.phase == "decode" and (v := p.shape.get(key)) is not None]
        out[key] = (min(seen), max(seen)) if seen else None
    return out


def taus(a: Routing, b: Routing) -> list[float | None]:
    """Kendall's tau-b of the two rankings at each size, over the policies both measured
    (None where one side ranks them all alike)."""
    out = []
    for i in range(len(SHARES_PCT)):
        common = [p for p in a.hit_rate if p in b.hit_rate
                  and a.hit_rate[p][i] is not None and b.hit_rate[p][i] is not None]
        x = [a.hit_rate[p][i] for p in common]
        y = [b.hit_rate[p][i] for p in common]
        if len(common) < 2:
            out.append(None)
            continue
        tau = kendalltau(x, y).statistic
        out.append(None if math.isnan(tau) else round(float(tau), 3))
    return out


def public_agreement(public: list[Routing]) -> dict:
    """How closely the public multi-layer logs rank the modes against each other: each
    pair's taus and, at each size, the lowest and its pair. Real logs disagree: a trace
    whose taus against them reach the lowest is as close to each as they are to each
    other, and (rankings without ties) a routing within 0.8 of two logs needs their own
    tau at 0.6 or more, Kendall's distance being a metric."""
    logs = [p for p in public if p.layers > 1]
    pairs = {(a.name, b.name): taus(a, b) for i, a in enumerate(logs) for b in logs[i + 1:]}
    lowest: list[dict | None] = []
    for i in range(len(SHARES_PCT)):
        seen = [(t[i], pair) for pair, t in pairs.items() if t[i] is not None]
        tau, pair = min(seen) if seen else (None, ())
        lowest.append(None if tau is None else {"tau": tau, "logs": list(pair)})
    return {"pairs": [{"logs": list(pair), "tau": t} for pair, t in pairs.items()],
            "lowest": lowest}


def lead(r: Routing, better: str, worse: str, i: int) -> float | None:
    """How many points `better` hits above `worse` at size i (None: one is not measured)."""
    missing: list[float | None] = [None] * len(SHARES_PCT)
    a, b = r.hit_rate.get(better, missing)[i], r.hit_rate.get(worse, missing)[i]
    return None if a is None or b is None else round(a - b, 2)


def sign(pp: float) -> int:
    return 0 if abs(pp) < TIE_PP else (1 if pp > 0 else -1)


def _says(pp: float, better: str, worse: str) -> str:
    if sign(pp) == 0:
        return f"{NAMES[better]} and {NAMES[worse]} are within {TIE_PP} pp ({pp:+.1f})"
    winner, loser = (better, worse) if pp > 0 else (worse, better)
    return f"{NAMES[winner]} beats {NAMES[loser]} by {abs(pp):.1f} pp"


def disagreements(trace: Routing, model: Routing) -> list[dict]:
    """The verdicts on which the trace and the model's routing differ, size by size."""
    out = []
    for i, share in enumerate(SHARES_PCT):
        for better, worse in VERDICTS:
            mine, theirs = lead(trace, better, worse, i), lead(model, better, worse, i)
            if mine is None or theirs is None or sign(mine) == sign(theirs):
                continue
            opposite = sign(mine) * sign(theirs) < 0
            text = (f"at {share} % of the pairs ({trace.slots[i]} slots, "
                    f"{trace.working_sets[i]} working sets): on {trace.name} "
                    f"{_says(mine, better, worse)}; {model.name} says "
                    + (f"the opposite ({_says(theirs, better, worse)})" if opposite
                       else _says(theirs, better, worse)))
            out.append({"share_pct": share, "policy": better, "against": worse,
                        "trace_pp": mine, "model_pp": theirs, "opposite": opposite,
                        "text": text})
    return out


def public_verdicts(public: list[Routing]) -> list[dict]:
    """How many public logs say a policy beats, ties or loses to the one it is weighed
    against, size by size."""
    out = []
    for better, worse in VERDICTS:
        for i, share in enumerate(SHARES_PCT):
            signs = [sign(pp) for p in public if (pp := lead(p, better, worse, i)) is not None]
            if signs:
                out.append({"policy": better, "against": worse, "share_pct": share,
                            "beats": signs.count(1), "ties": signs.count(0),
                            "loses": signs.count(-1)})
    return out


def notes(traces: list[Routing], model: Routing) -> list[str]:
    """What a reader must know before trusting the comparison: sizes below one token's
    working set, traces too short for their verdicts to settle, traces of one layer."""
    out = [f"warning: {t.name} at {share} % of the pairs holds {n} slots, below one "
           f"token's working set ({t.layers * t.top_k}): LRU and 2Q hit next to nothing "
           "there, so the ranking at that size says little about larger arenas"
           for t in (*traces, model) for share, n in zip(SHARES_PCT, t.slots)
           if n < t.layers * t.top_k]
    out += [f"warning: {t.name} has {t.tokens:,} tokens; below {SETTLED_TOKENS:,}, prefixes "
            "of the demo model's own recording give verdicts its whole recording does not "
            "(pinning from the first half most of all: its routing drifts), so these may not "
            "hold over a longer run: record or import more tokens"
            for t in traces if t.tokens < SETTLED_TOKENS]
    read_ahead = ", ".join(m for m, mode in MODES.items() if mode.reads_ahead)
    out += [f"{t.name} has one layer: nothing is read ahead of layer 0, so the read-ahead "
            f"modes ({read_ahead}) are not measured and their verdicts not given"
            for t in (*traces, model) if t.layers == 1]
    return out


def report(traces: list[Routing], model: Routing, public: list[Routing]) -> dict:
    """Plain data: every column, the decode range, the taus of each trace against the
    model's routing and each public log, the public logs' taus against each other, and
    the verdicts that differ."""
    others = [model, *public]
    return {
        "shares_pct": list(SHARES_PCT),
        "columns": [asdict(r) for r in (*traces, model, *public)],
        "decode_range": decode_range(public),
        "tau": {t.name: {o.name: taus(t, o) for o in others} for t in traces},
        "public_tau": public_agreement(public),
        "disagreements": {t.name: disagreements(t, model) for t in traces},
        "public_verdicts": public_verdicts(public),
        "notes": notes(traces, model),
    }
