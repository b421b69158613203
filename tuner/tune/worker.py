"""A tune's worker: one engine session that measures trials as live settings changes.

A trial's settings are submitted to the running session like any live change (restart-
class knobs rebuild the engine in place; the model is never reloaded for a live knob),
then the workload is decoded from its start: `warmup` tokens unmeasured, then the
measured span that follows them (not a replay of the warm-up: a span that repeated the
tokens the arena was just warmed on would flatter every cache policy). The baseline is
measured on the same session before the first trial, again after every `sentinel_every`
trials and once more after the last (the sentinel), and each trial is scored against the
mean of the baselines measured before and after it: a machine that changes speed moves
them all, so the paired difference keeps what the settings did (seed 001). Workers never
compare across each other; each has its own baseline.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tuner.settings import Settings, SettingsError, apply, to_config, validate

Measure = Callable[[Settings], dict]  # settings -> figures of one measured span


class Stopped(Exception):
    """The tune was stopped while a span was being measured: its figures are not whole."""

SENTINEL_EVERY = 3  # trials of a worker between two measurements of its baseline


@dataclass(frozen=True)
class Span:
    """What every measurement decodes: the session's workload (the baseline's `workload`
    knob, or its fixed prompt) from its start, `warmup` tokens unmeasured, then the `tokens`
    that follow them, measured; prompt tokens count as tokens. The output hash covers both:
    the same settings give the same tokens."""

    tokens: int
    warmup: int

    def measure(self, session, stop: threading.Event | None = None) -> dict:
        session.rewind()
        session.run(self.warmup, stop)
        session.reset_counters()  # at the next token boundary: the span's first token
        session.run(self.tokens, stop)
        if stop is not None and stop.is_set():
            raise Stopped("stopped during a measurement")
        return figures(session.snapshot())


def figures(snap: dict) -> dict[str, Any]:
    """What a trial is scored and guarded on, from the snapshot after its span."""
    t = snap["totals"]
    return {"tokens": t["tokens"], "ms_per_token": t["ms_per_token"],
            "stall_ms_per_token": round(t["stall_ms"] / t["tokens"], 3),
            "bytes_per_token": t["bytes_per_token"], "hit_rate": t["hit_rate"],
            "quality_kl": t["quality_kl"], "top1_agreement": t["top1_agreement"],
            "output_hash": snap["output_hash"]}


class LiveMeasure:
    """Measures settings on one running engine session, changed live between spans."""

    def __init__(self, base: Settings, span: Span, prompt_ids: list[int] | None = None,
                 stop: threading.Event | None = None):
        from tuner.engine.session.session import Session  # torch only where a session is built

        self.span, self.stop = span, stop
        self.session = Session(to_config(base), prompt_ids=prompt_ids)

    def __call__(self, settings: Settings) -> dict:
        session = self.session
        version = session.submit(to_config(settings))  # taken up at the span's first token
        measured = self.span.measure(session, self.stop)
        refused = session.rejection(version)
        if refused:
            raise SettingsError({"settings": f"the engine refused the trial's settings: "
                                             f"{refused}"})
        return measured

    def close(self) -> None:
        self.session.engine.close()


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def paired(before: dict, after: dict | None) -> dict[str, Any]:
    """What a trial is scored against: the mean timings of the baselines measured before
    and after it (a drift that is linear in time cancels out), or the one before alone."""
    if after is None:
        return {**before, "after_ms_per_token": None}
    mean = {k: round((before[k] + after[k]) / 2, 3)
            for k in ("ms_per_token", "stall_ms_per_token")}
    return {**before, **mean, "before_ms_per_token": before["ms_per_token"],
            "after_ms_per_token": after["ms_per_token"]}


class TrialWorker:
    """Trials on one measure between measurements of this worker's baseline, A B ... A as
    `tuner ab` runs: a trial is settled once the baseline has been measured again after it,
    and scored against the baselines before and after it."""

    def __init__(self, base: dict[str, Any], span: Span, sentinel_every: int,
                 measure: Measure | None = None, name: str | None = None,
                 prompt_ids: list[int] | None = None, stop: threading.Event | None = None):
        """`stop`: set, the span being measured ends at the next token and the trial
        raises Stopped (in-process workers only)."""
        if sentinel_every < 1:
            raise ValueError(f"sentinel_every = {sentinel_every}: the baseline must be "
                             "measured again after at least every 1 trial")
        self.base = validate(base)
        self.every = sentinel_every
        self.measure = measure or LiveMeasure(self.base, span, prompt_ids, stop)
        self.name = name or worker_name()
        self.baselines: list[dict] = []  # every baseline measurement, in order
        self.waiting: list[dict] = []  # trials measured since the latest baseline
        # Trials settled and not handed out yet: kept here, not in a local, so a stop
        # during the next trial's measurement still finds them (`settle`).
        self.settled: list[dict] = []

    def _baseline(self) -> None:
        self.baselines.append({"index": len(self.baselines), **self.measure(self.base)})

    def trial(self, number: int, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Measures trial `number` (its figures, or why the engine refused it); returns
        the earlier trials this settles, with the baseline each pairs with."""
        if not self.baselines:
            self.measure(self.base)  # page cache and lazy initialisation, paid unmeasured
            self._baseline()
        elif len(self.waiting) >= self.every:
            self._settle(closing=True)
        out: dict[str, Any] = {"number": number, "worker": self.name}
        try:
            out["figures"] = self.measure(apply(self.base, params))
        except SettingsError as err:
            out["refused"] = str(err)
        self.waiting.append(out)
        return self._hand_out()

    def settle(self, closing: bool = True) -> list[dict[str, Any]]:
        """Every settled trial not handed out yet, with the waiting trials settled now
        against the mean of the baseline before them and one measured now, or
        (`closing` False, as when stopped) against the one before alone."""
        self._settle(closing)
        return self._hand_out()

    def _settle(self, closing: bool) -> None:
        if not self.waiting:
            return
        before = self.baselines[-1]
        if closing:
            self._baseline()
        pair = paired(before, self.baselines[-1] if closing else None)
        self.settled, self.waiting = (self.settled + [{**t, "baseline": pair}
                                                      for t in self.waiting], [])

    def _hand_out(self) -> list[dict[str, Any]]:
        out, self.settled = self.settled, []
        return out

    def close(self) -> None:
        close = getattr(self.measure, "close", None)
        if close:
            close()
