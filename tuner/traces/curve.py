"""The live hit curves: what hit rate the running session's own recent routing would get
from arenas of other sizes, under LRU, 2Q and Belady's bound.

The engine's expert log holds the routings of the last tokens (twice the window). They are
replayed through the engine's slot map and policies (`replay_rows`), the older half only
warming the arena and the window's tokens counted, at sizes around the current arena.
The gap between the running policy and `opt` at the current size is what a better policy
could win; the rise of the running policy's curve above the current size is what more
slots would buy. Sizes are also given in working sets (one token's layers x top-k
routings); one working set is always among them, as below it LRU and 2Q hit next to
nothing, and an arena below it comes with a warning.

The replays are plain Python: in a thread of the engine's process they would hold the GIL
the decode thread needs, so `LiveCurve` runs them in a worker process, one at a time, and
only while someone asks for the curve.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import sys
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import wait as wait_for
from typing import Any

import numpy as np

from tuner.traces.replay import notes, pct, replay_rows
from tuner.traces.sizes import in_working_sets, pairs, working_set
from tuner.vocabulary.counters import C
from tuner.vocabulary.policies import POLICIES as CACHE_POLICIES
from tuner.vocabulary.trace_format import Trace

log = logging.getLogger(__name__)

SIZE_FACTORS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)  # times the current arena
MIN_INTERVAL_S = 2.0  # between two curves of a session that keeps decoding
POLICIES = (*CACHE_POLICIES, "opt")  # the engine's cache policies and Belady's bound


def curve_sizes(arena: int, pairs: int, working_set: int) -> list[int]:
    """Arena sizes around `arena`, capped at the model's layer-expert pairs; `arena` and
    one working set (within the pairs) are always among them."""
    around = {min(pairs, max(1, round(arena * f))) for f in SIZE_FACTORS}
    return sorted(around | {arena, min(pairs, working_set)})


def hit_curve(routings: np.ndarray, counted: int, num_experts: int, arena: int,
              settings: dict[str, Any]) -> dict[str, Any]:
    """Hit rates of `routings` [T, L, K] (-1: empty) replayed at sizes around `arena`,
    counting the last `counted` tokens. `settings`: the non-default knobs the routing was
    recorded under, for the notes."""
    started = time.perf_counter()
    trace = Trace(routings, {"num_experts": num_experts, "settings": settings})
    rows, layers = trace.rows(), trace.layers
    warm = max(0, trace.tokens - counted)
    sizes = curve_sizes(arena, pairs(trace), working_set(trace))
    rates: dict[str, list[float | None]] = {}
    for policy in POLICIES:
        runs = [replay_rows(rows, layers, policy, n, counted_from=warm) for n in sizes]
        rates[policy] = [pct(r.hits.sum(), r.lookups.sum()) for r in runs]
    return {"sizes": sizes, "working_set": working_set(trace),
            "working_sets": [in_working_sets(n, trace) for n in sizes], "hit_rate": rates,
            "tokens": trace.tokens - warm, "warmup_tokens": warm,
            "notes": notes(trace, [arena]), "seconds": round(time.perf_counter() - started, 3)}


def _key(session) -> tuple:
    """What a curve depends on: the counters (a reset or rebuild makes new ones), the
    tokens decoded, the arena and the settings."""
    engine = session.engine
    return (id(engine.counters), session.tokens, session.applied_version)


def _read(session) -> dict[str, Any]:
    """What a curve is computed from, read from the session at one moment."""
    engine, cfg = session.engine, session.cfg
    counts, tokens, _ = engine.counters.read(window=True)
    hits, lookups = counts[:, C.hits.index].sum(), counts[:, C.lookups.index].sum()
    return {
        "routings": engine.counters.routings(),
        "window": tokens,
        "num_experts": session.ckpt.config.num_experts,
        "arena": engine.slots.n,
        "policy": engine.slots.policy.name,
        "live_hit_rate": pct(hits, lookups),
        "settings_version": session.applied_version,
        "prefetch": cfg.prefetch,
        "cpu_pool": cfg.cpu_pool,
        "settings": {k: getattr(cfg, k) for k in ("moce_bonus", "moce_bonus_r1")},
        "at_token": session.tokens,
    }


def _summary(source: dict[str, Any], curve: dict[str, Any]) -> dict[str, Any]:
    """The curve with what the UIs lead with: the current point, the gap to the bound and
    what the next size up would buy under the running policy."""
    sizes, rates, policy = curve["sizes"], curve["hit_rate"], source["policy"]
    i = sizes.index(source["arena"])
    here = {p: rates[p][i] for p in POLICIES}
    gap = None if None in (here["opt"], here[policy]) else round(here["opt"] - here[policy], 2)
    nxt = None
    if i + 1 < len(sizes) and None not in (rates[policy][i + 1], here[policy]):
        nxt = {"slots": sizes[i + 1], "added": sizes[i + 1] - sizes[i],
               "gain_pp": round(rates[policy][i + 1] - here[policy], 2)}
    notes = list(curve["notes"])
    if source["prefetch"] != "off" and not source["cpu_pool"]:
        notes.append(f"prefetch {source['prefetch']} is on: the live hit rate includes "
                     "speculation, which the replay leaves out")
    if source["cpu_pool"]:
        notes.append("cpu_pool is on: the live arena moves only by the adaptive tier and "
                     "adapt-fetch, so the live point is not on the replayed policies' curves")
    return {**{k: source[k] for k in ("arena", "policy", "live_hit_rate", "settings_version",
                                      "at_token", "window")},
            **curve, "at_arena": here, "gap_pp": gap, "next": nxt, "notes": notes}


def _quiet() -> None:
    """In the worker process: it writes nothing to the terminal a UI may be drawing on
    (its results and errors come back through the future)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)


def _compute(source: dict[str, Any]) -> dict[str, Any]:
    """In the worker process."""
    curve = hit_curve(source["routings"], source["window"], source["num_experts"],
                      source["arena"], source["settings"])
    return _summary(source, curve)


class LiveCurve:
    """The newest curve of a session, recomputed in a worker process when the session has
    moved on since and someone asks (`latest`). One computation at a time; the worker
    process is started on the first request and ends with `close`."""

    def __init__(self, session, min_interval: float = MIN_INTERVAL_S):
        self.session = session
        self.min_interval = min_interval
        self._pool: ProcessPoolExecutor | None = None
        self._running: Future | None = None
        self._running_key: tuple | None = None
        self._latest: dict[str, Any] | None = None
        self._key: tuple | None = None
        self._done_at = 0.0
        self._lock = threading.Lock()

    def latest(self) -> dict[str, Any] | None:
        """The newest finished curve (None before the first), starting a new one when the
        session moved on since the last was taken."""
        with self._lock:
            self._collect()
            if self._running is None:
                self._maybe_start()
            return self._latest

    def _collect(self) -> None:
        if self._running is None or not self._running.done():
            return
        future, self._running = self._running, None
        self._key, self._done_at = self._running_key, time.monotonic()
        try:
            self._latest = future.result()
        except Exception as err:  # shown where the curve would be
            log.exception("the live hit curve failed")
            self._latest = {"error": f"{type(err).__name__}: {err}"}

    def _maybe_start(self) -> None:
        key = _key(self.session)
        if key == self._key or time.monotonic() - self._done_at < self.min_interval:
            return
        source = _read(self.session)
        if len(source["routings"]) == 0:
            return  # nothing decoded yet
        # The pool's first lock starts multiprocessing's resource tracker, which is handed
        # sys.stderr by file descriptor; a terminal UI's stand-in for it has none.
        with contextlib.redirect_stderr(sys.__stderr__):
            if self._pool is None:
                # spawn: a fork would copy the engine's threads and torch's state
                self._pool = ProcessPoolExecutor(
                    1, mp_context=multiprocessing.get_context("spawn"), initializer=_quiet)
            self._running, self._running_key = self._pool.submit(_compute, source), key

    def fresh(self, timeout: float) -> dict[str, Any] | None:
        """A curve of the session as it is now: waits for the one it starts (or the one
        running) to finish."""
        with self._lock:
            self._collect()
            self._done_at = 0.0  # no pause between curves for this one
            if self._running is None:
                self._maybe_start()
            running = self._running
        if running is not None:
            wait_for([running], timeout)
        with self._lock:
            self._collect()
            return self._latest

    def close(self) -> None:
        """Ends the worker process now, a curve in the middle of its computation too (the
        process would otherwise wait for it at exit: seconds on a loaded machine)."""
        with self._lock:
            if self._pool is not None:
                # before shutdown, which forgets them; Python 3.14's terminate_workers
                processes = list(getattr(self._pool, "_processes", {}).values())
                self._pool.shutdown(wait=False, cancel_futures=True)
                for process in processes:
                    process.terminate()
                self._pool = None
