"""Interleaved A/B runs with a drift sentinel (seed 001: a single before/after pair on a
machine whose speed drifts is worthless).

Each arm is a preset name, a preset file or knob overrides (`moe_bonus=0.85,decode_2q=1`),
applied on top of common base settings. Every run is a fresh session built from its
arm's settings: same seed, same model, same prompts, a cold arena. The counters (hit rate,
bytes per token, output hash) are deterministic, so they must repeat exactly across the
runs of an arm; the report checks it. Only the timings are compared statistically.

Every run also measures what its settings cost in quality (the quality probe, every
`QUALITY_EVERY` tokens unless the arm sets quality_every, off the timed path): KL and top-1
agreement are deterministic counters too. Rules (gate.py) reject an arm whatever its speed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tuner.engine.session import Session
from tuner.measure.compare import compare, schedule
from tuner.measure.gate import Rule, apply_rules
from tuner.presets import PresetError, knob_diff, resolve
from tuner.settings import Settings, SettingsError, apply, from_texts, to_config

START_STATE = ("every run is a fresh session from its arm's settings: same seed, same model, "
               "same prompts, cold arena")
# Counters a run of one arm must repeat exactly; timings are the only thing that may vary.
REPEATED = ("hit_rate", "sync_misses", "bytes_per_token", "output_hash", "quality_kl",
            "top1_agreement")
QUALITY_EVERY = 4  # tokens between the quality probe's samples in a run


ARM_FORMS = "an arm is a preset name, a .toml file or knob=value pairs separated by commas"


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


def run_once(settings: Settings, tokens: int) -> dict[str, Any]:
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
            "arena_slots": snap["arena"]["slots"]}


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


def run_ab(a: Settings, b: Settings, pairs: int, tokens: int, warmup: int = 1,
           progress: Callable[[int, int, dict], None] | None = None,
           rules: list[Rule] | None = None) -> dict[str, Any]:
    """Runs A B A B ... A and compares them; `progress(i, n, run)` after each run; an arm
    failing one of `rules` is rejected in the verdict."""
    order = schedule(pairs)
    for _ in range(warmup):  # page cache and lazy initialisation, paid before measuring
        run_once(a, tokens)
    runs = []
    for i, arm in enumerate(order, 1):
        run = {"run": i, "arm": arm, **run_once(a if arm == "A" else b, tokens)}
        runs.append(run)
        if progress:
            progress(i, len(order), run)
    result = compare([r["ms_per_token"] for r in runs])
    for arm in ("A", "B"):
        result["arms"][arm].update(repeated([r for r in runs if r["arm"] == arm]))
    apply_rules(result, rules or [])
    return {"pairs": pairs, "tokens": tokens, "warmup_runs": warmup,
            "start_state": START_STATE, "model": runs[0]["model"],
            "arena_slots": {"A": runs[0]["arena_slots"], "B": runs[1]["arena_slots"]},
            "knob_diff": knob_diff(a, b), "runs": runs, **result}
