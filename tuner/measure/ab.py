"""Interleaved A/B runs with a drift sentinel (seed 001: a single before/after pair on a
machine whose speed drifts is worthless).

Each arm is a preset name, a preset file or knob overrides (`moce_bonus=0.85,cache_policy=2q`),
applied on top of common base settings. Every run is a fresh session built from its
arm's settings: same seed, same model, same prompts, a cold arena. The counters (hit rate,
bytes per token, output hash) are deterministic, so they must repeat exactly across the
runs of an arm; the report checks it. Only the timings are compared statistically.

Every run also measures what its settings cost in quality (the quality probe, every
`QUALITY_EVERY` tokens unless the arm sets quality_every, off the timed path): KL and top-1
agreement are deterministic counters too. The quality gate (rules.py) rejects an arm over
its limits whatever its speed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tuner.knobs import lossy_total
from tuner.measure.compare import compare, preload, schedule
from tuner.measure.rules import QUALITY_EVERY, REJECT, evaluate, ruleset, ruleset_label, verdict
from tuner.presets import PresetError, knob_diff, resolve
from tuner.settings import Settings, SettingsError, apply, from_texts, to_config

if TYPE_CHECKING:
    from tuner.control.models import ABSpec

START_STATE = ("every run is a fresh session from its arm's settings: same seed, same model, "
               "same prompts, cold arena")
# Counters a run of one arm must repeat exactly; timings are the only thing that may vary.
REPEATED = ("hit_rate", "sync_misses", "bytes_per_token", "output_hash", "quality_kl",
            "top1_agreement")


ARM_FORMS = "an arm is a preset name, a .toml file or knob=value pairs separated by commas"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped an A/B: `runs` are those measured before it, `planned`
    how many there were to be."""

    def __init__(self, runs: list[dict[str, Any]], planned: int):
        super().__init__()
        self.runs, self.planned = runs, planned


def parse_overrides(text: str) -> dict[str, str]:
    changes = {}
    for part in (p.strip() for p in text.split(",")):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise SettingsError({"arm": f"arm {text!r}: {part!r} is not knob=value; {ARM_FORMS}"})
        changes[name.strip()] = value.strip()
    return changes


def arm_settings(text: str, base: Settings) -> Settings:
    """An arm's settings: its preset's knobs or its overrides on top of `base`; values are
    validated by the settings model, so a bad one is named with its allowed range."""
    if "=" in text:
        return apply(base, from_texts(parse_overrides(text)))
    try:
        preset = resolve(text)
    except PresetError as err:
        raise PresetError(f"arm {text!r}", f"{err}; {ARM_FORMS}") from None
    return apply(base, preset.knobs)


def _phase(t: dict) -> dict[str, Any]:
    """The figures the rules read from one phase's totals."""
    tokens = t["tokens"]
    served = t["hits"] + t["pf_timely"] + t["pf_late"]
    return {"tokens": tokens, "sync_misses_per_token": t["sync_misses_per_token"],
            "hits_per_token": round(served / tokens, 3) if tokens else None,
            "stall_ms_per_token": round(t["stall_ms"] / tokens, 4) if tokens else None,
            "ms_per_token": t["ms_per_token"], "quality_kl": t["quality_kl"],
            "top1_agreement": t["top1_agreement"]}


def run_once(settings: Settings, tokens: int) -> dict[str, Any]:
    from tuner.engine.session.session import Session  # torch where it runs: arms are checked first

    cfg = to_config(settings)
    session = Session(cfg if cfg.quality_every else replace(cfg, quality_every=QUALITY_EVERY))
    try:
        session.run(tokens)
        snap = session.snapshot()
    finally:
        session.engine.close()
    t = snap["totals"]
    return {"ms_per_token": t["ms_per_token"], "hit_rate": t["hit_rate"],
            "sync_misses": t["sync_misses"], "bytes_per_token": t["bytes_per_token"],
            "output_hash": snap["output_hash"], "quality_kl": t["quality_kl"],
            "top1_agreement": t["top1_agreement"], "model": snap["model"]["name"],
            "arena_slots": snap["arena"]["slots"],
            "phases": {name: _phase(p) for name, p in snap["phases"].items()}}


def repeated(runs: list[dict]) -> dict[str, Any]:
    """Per counter: its value when every run agrees, else every run's value; `differ`
    names the counters that did not repeat."""
    out: dict[str, Any] = {"differ": []}
    for key in REPEATED:
        values = [r[key] for r in runs]
        out[key] = values[0] if len(set(values)) == 1 else values
        if len(set(values)) > 1:
            out["differ"].append(key)
    out["identical"] = not out["differ"]
    return out


def _measure(a: Settings, b: Settings, pairs: int, tokens: int, workload: str, first: int,
             total: int, progress: Callable[[int, int, dict], None] | None,
             measured: list[dict[str, Any]]) -> None:
    """Runs A B A B ... A on one workload, each run added to `measured` as it ends."""
    for i, arm in enumerate(schedule(pairs), first):
        run = {"run": i, "arm": arm, "workload": workload,
               **run_once(a if arm == "A" else b, tokens)}
        measured.append(run)
        if progress:
            progress(i, total, run)


def _compared(workload: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One workload's runs, compared."""
    result = compare([r["ms_per_token"] for r in runs])
    for arm in ("A", "B"):
        result["arms"][arm].update(repeated([r for r in runs if r["arm"] == arm]))
    return {"workload": workload, "runs": runs, **result}


def span_notes(runs: list[dict[str, Any]], tokens: int) -> list[str]:
    """What a run's span of `tokens` leaves unmeasured, said once: a span within the first
    prompt is all prefill, so no decode speed, KL or top-1 agreement."""
    decoded = min(r["phases"]["decode"]["tokens"] for r in runs)
    if decoded:
        return []
    prompt = max(r["phases"]["prefill"]["tokens"] for r in runs)
    return [f"no run decoded a token: each run's {tokens} tokens were prompt ({prompt} "
            f"prefilled), so the comparison is of prefill alone and KL and top-1 agreement "
            f"were not measured; give more tokens than the prompt, e.g. {prompt + tokens}"]


def run_ab(a: Settings, b: Settings, spec: ABSpec, warmup: int = 1,
           progress: Callable[[int, int, dict], None] | None = None) -> dict[str, Any]:
    """Runs A B A B ... A (`spec.pairs` pairs of `spec.tokens` tokens) on each of
    `spec.workloads` (default: the one A's settings name) and compares them; `spec.rules`
    names a rule set (rules.py) and `spec.max_kl` / `spec.min_agreement` the quality gate,
    whose outcomes per workload and phase decide the verdict. `progress(i, n, run)` after
    each run. Ctrl-C raises Interrupted with the runs measured so far; once every run is
    measured it stops nothing: the result has its verdict and says `interrupted`."""
    names = list(spec.workloads or [a.workload])
    arms = {w: (apply(a, {"workload": w}), apply(b, {"workload": w})) for w in names}
    per = len(schedule(spec.pairs))
    measured: list[dict[str, Any]] = []
    interrupted = False
    try:
        preload()  # the verdict's statistics, loaded before the runs, not after the last
        for _ in range(warmup):  # page cache and lazy initialisation, paid before measuring
            run_once(arms[names[0]][0], spec.tokens)
        for i, w in enumerate(names):
            _measure(*arms[w], spec.pairs, spec.tokens, w, 1 + i * per, per * len(names),
                     progress, measured)
    except KeyboardInterrupt:
        if len(measured) < per * len(names):
            raise Interrupted(measured, per * len(names)) from None
        interrupted = True
    while True:  # the runs are all measured: the comparison is computed again if cut short
        try:
            return {**_result(a, b, spec, warmup, names, measured), "interrupted": interrupted}
        except KeyboardInterrupt:
            interrupted = True


def _result(a: Settings, b: Settings, spec: ABSpec, warmup: int, names: list[str],
            measured: list[dict[str, Any]]) -> dict[str, Any]:
    """The comparison of every workload's runs, the rules' outcomes and the verdict."""
    rule_list = ruleset(spec.rules, spec.max_kl, spec.min_agreement)
    label = ruleset_label(spec.rules, rule_list)
    results = [_compared(w, [r for r in measured if r["workload"] == w]) for w in names]
    lossy = {"A": lossy_total(a), "B": lossy_total(b)}
    outcomes = [o for r in results for o in evaluate(rule_list, r["workload"], r["runs"],
                                                     lossy)]
    if len(results) == 1:
        timing = results[0]["verdict"]
    else:
        timing = "; ".join(f"{r['workload']}: {r['verdict']}" for r in results)
    final = f"{verdict(label, outcomes, names)}. Timing: {timing}" if rule_list else timing
    first = results[0]
    return {"pairs": spec.pairs, "tokens": spec.tokens, "warmup_runs": warmup,
            "start_state": START_STATE, "model": first["runs"][0]["model"],
            "arena_slots": {"A": first["runs"][0]["arena_slots"],
                            "B": first["runs"][1]["arena_slots"]},
            "knob_diff": knob_diff(a, b), **first, "runs": measured,
            "workloads": results, "rules": label, "outcomes": outcomes, "verdict": final,
            "rejected": any(o["status"] == REJECT for o in outcomes),
            "notes": span_notes(measured, spec.tokens)}
