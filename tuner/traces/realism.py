"""Whether a decision made on one routing transfers to another: a trace's shape figures
and policy ranking beside the model's own routing and public route logs.

For each routing (a column): the shape figures of `tuner trace stats` that decide cache
behaviour (popularity: top-10 % share, Gini, pairs never routed; temporal reuse: the
prev-token overlap, its token-shuffled baseline and their difference), and the hit rate of
every replay mode (modes.py) at 15, 25 and 50 % of the layer-expert pairs, each size also
in working sets. Three kinds of column:

* the traces given (an operator's own routing, imported or recorded);
* the model's own routing: the demo model's figures as measured when it was made
  (data/demo_routing.json, with the command that measured them), or a recording given;
* public route logs (data/public_routing.json): figures only, with their sources.

Rankings are compared size by size with Kendall's tau-b over the policies both columns
have; the verdicts an operator acts on (pin or LRU, 2Q or LRU, read ahead or not) are
spelled out where a trace and the model's routing disagree, and counted over the public
logs.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from importlib import resources

from scipy.stats import kendalltau

from tuner.traces.modes import MODES
from tuner.traces.replay import pct, replay_rows
from tuner.traces.sizes import in_working_sets, pairs
from tuner.traces.stats import trace_stats
from tuner.vocabulary.trace_format import Trace

SHARES_PCT = (15, 25, 50)  # arena sizes, % of the layer-expert pairs (as the public figures)
# (key in trace_stats' totals, label, decimals)
SHAPE = (("top10_share", "top-10 % experts' share of routings, %", 1),
         ("gini", "Gini of routing counts", 3),
         ("unrouted_pct", "layer-expert pairs never routed, %", 1),
         ("prev_pct", "prev-token slot overlap, %", 1),
         ("prev_shuffled_pct", "  the same, tokens shuffled, %", 1),
         ("prev_temporal_pp", "  temporal: overlap - shuffled, pp", 1))
NAMES = {"lru": "LRU", "2q": "two-hit LRU", "opt": "Belady's bound",
         "static": "pinning the most-routed pairs",
         "static_half": "pinning the first half's most-routed pairs",
         "lru+prev": "reading ahead the previous token's routing",
         "lru+oracle": "reading ahead the exact routing"}
# (policy, the policy it is weighed against): the choices an operator makes
VERDICTS = (("static", "lru"), ("static_half", "lru"), ("2q", "lru"), ("lru+prev", "lru"),
            ("lru+oracle", "opt"))
TIE_PP = 0.5  # closer than this, two policies are as good as each other
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

    @property
    def short(self) -> str:
        return self.label or self.name

    def ranking(self, i: int) -> list[str]:
        """Its policies, best first, at size i."""
        return sorted(self.hit_rate, key=lambda p: -(self.hit_rate[p][i] or 0.0))


def measure(trace: Trace, name: str, kind: str = "trace") -> Routing:
    """A trace's column: its shape figures and every mode replayed at SHARES_PCT."""
    totals = trace_stats(trace, caches=())["totals"]
    slots = [max(1, round(pairs(trace) * s / 100)) for s in SHARES_PCT]
    rows, starts = trace.rows(), trace.sequence_starts
    hit_rate = {}
    for mode in MODES:
        runs = [replay_rows(rows, trace.layers, mode, n, starts=starts) for n in slots]
        hit_rate[mode] = [pct(r.hits.sum(), r.lookups.sum()) for r in runs]
    meta = trace.meta
    source = " · ".join(str(v) for v in (meta.get("model"), meta.get("source")) if v)
    return Routing(name, kind, source or "-", trace.tokens, trace.layers, trace.top_k,
                   trace.num_experts, {key: totals[key] for key, _, _ in SHAPE}, slots,
                   hit_rate, working_sets=[in_working_sets(n, trace) for n in slots])


def _load(name: str) -> dict:
    return json.loads(resources.files("tuner.traces").joinpath("data", name).read_text())


def _column(doc: dict, kind: str) -> Routing:
    ws = doc["layers"] * doc["top_k"]
    return Routing(doc["name"], kind, doc["source"], doc["tokens"], doc["layers"],
                   doc["top_k"], doc["experts"], doc["shape"], doc["slots"], doc["hit_rate"],
                   doc.get("phase"), [round(n / ws, 2) for n in doc["slots"]],
                   doc.get("label", ""))


def public_logs() -> list[Routing]:
    return [_column(log, "public") for log in _load(PUBLIC_FILE)["logs"]]


def demo_routing() -> tuple[Routing, dict]:
    """The demo model's column as shipped, and the file (model id, how it was measured)."""
    doc = _load(DEMO_FILE)
    return _column(doc, "model"), doc


def decode_range(public: list[Routing]) -> dict[str, tuple[float, float]]:
    """Each shape figure's min and max over the public decode logs."""
    logs = [p for p in public if p.phase == "decode"]
    return {key: (min(p.shape[key] for p in logs), max(p.shape[key] for p in logs))
            for key, _, _ in SHAPE}


def taus(a: Routing, b: Routing) -> list[float | None]:
    """Kendall's tau-b of the two rankings at each size, over the policies both have
    (None where one side ranks them all alike)."""
    common = [p for p in a.hit_rate if p in b.hit_rate]
    out = []
    for i in range(len(SHARES_PCT)):
        x = [a.hit_rate[p][i] for p in common]
        y = [b.hit_rate[p][i] for p in common]
        if None in x or None in y:
            out.append(None)
            continue
        tau = kendalltau(x, y).statistic
        out.append(None if math.isnan(tau) else round(float(tau), 3))
    return out


def lead(r: Routing, better: str, worse: str, i: int) -> float | None:
    """How many points `better` hits above `worse` at size i (None: one is not measured)."""
    missing = [None] * len(SHARES_PCT)
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


def report(traces: list[Routing], model: Routing, public: list[Routing]) -> dict:
    """Plain data: every column, the decode range, the taus of each trace against the
    model's routing and each public log, and the verdicts that differ."""
    others = [model, *public]
    return {
        "shares_pct": list(SHARES_PCT),
        "columns": [asdict(r) for r in (*traces, model, *public)],
        "decode_range": decode_range(public),
        "tau": {t.name: {o.name: taus(t, o) for o in others} for t in traces},
        "disagreements": {t.name: disagreements(t, model) for t in traces},
        "public_verdicts": public_verdicts(public),
        "notes": [f"warning: {t.name} at {share} % of the pairs holds {n} slots, below one "
                  f"token's working set ({t.layers * t.top_k}): LRU and 2Q hit next to "
                  "nothing there, so the ranking at that size says little about larger arenas"
                  for t in (*traces, model) for share, n in zip(SHARES_PCT, t.slots)
                  if n < t.layers * t.top_k],
    }

