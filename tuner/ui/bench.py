"""What the terminal UI costs the engine it shows.

The engine and an embedded UI share one process and one GIL, so the UI's repaints take
time from decoding. `measure_ui_overhead` decodes with no UI, then with the UI attached
(headless, on each screen in turn), then with no UI again as a sentinel: if the two runs
without a UI differ, the machine's speed drifted during the measurement and the ratios
carry that much doubt.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tuner.control import Controller
from tuner.engine.session import Session
from tuner.settings import load, to_config
from tuner.ui import DEFAULT_REFRESH_HZ
from tuner.ui.app import create_app
from tuner.ui.embedded import EmbeddedBackend


def _tokens_per_second(session: Session, seconds: float) -> float:
    t0, n0 = time.perf_counter(), session.tokens
    time.sleep(seconds)
    return (session.tokens - n0) / (time.perf_counter() - t0)


async def _with_ui(controller: Controller, screens: Sequence[str], seconds: float,
                   refresh_hz: float, size: tuple[int, int]
                   ) -> dict[str, tuple[float, float]]:
    """Per screen: the engine's tokens per second, and the CPU seconds per second of the
    UI's thread (the app's loop runs on this thread), which machine load does not blur."""
    session = controller.session
    app = create_app(EmbeddedBackend(controller), refresh_hz=refresh_hz)
    measured = {}
    async with app.run_test(size=size) as pilot:
        for screen in screens:
            await app.switch_mode(screen)
            await pilot.pause(1 / refresh_hz)  # built and painted once before the clock runs
            t0, cpu0, n0 = time.perf_counter(), time.thread_time(), session.tokens
            await asyncio.sleep(seconds)
            wall = time.perf_counter() - t0
            measured[screen] = ((session.tokens - n0) / wall, (time.thread_time() - cpu0) / wall)
    return measured


def measure_ui_overhead(overrides: Mapping[str, Any] | None = None, seconds: float = 5.0,
                        refresh_hz: float = DEFAULT_REFRESH_HZ,
                        screens: Sequence[str] = ("overview", "layers"),
                        size: tuple[int, int] = (160, 50), warmup: float = 1.0,
                        report: Callable[[str], None] = print) -> dict[str, float]:
    """Tokens per second of one engine (knob values `overrides` on top of the defaults and
    the environment) without a UI, with the UI on each of `screens` for `seconds` each, and
    without a UI again. Returns the rates, each screen's ratio to the mean of the two runs
    without a UI and the UI thread's busy share; `report` gets them as lines of text."""
    settings = load(cli=dict(overrides or {}))
    session = Session(to_config(settings))
    controller = Controller(session, settings)
    session.start()
    try:
        _tokens_per_second(session, warmup)
        before = _tokens_per_second(session, seconds)
        with_ui = asyncio.run(_with_ui(controller, screens, seconds, refresh_hz, size))
        after = _tokens_per_second(session, seconds)
    finally:
        session.stop()
    alone = (before + after) / 2
    result = {"alone_before": before, "alone_after": after}
    report(f"{session.ckpt.name}: engine alone {before:.1f} tok/s, {after:.1f} tok/s after "
           f"(drift {after / before - 1:+.1%})")
    for screen, (rate, cpu) in with_ui.items():
        result.update({f"ui_{screen}": rate, f"ratio_{screen}": rate / alone,
                       f"ui_cpu_{screen}": cpu})
        report(f"with the UI on {screen} at {refresh_hz:g} Hz, {size[0]}x{size[1]}: "
               f"{rate:.1f} tok/s, ratio {rate / alone:.3f} (the UI thread busy "
               f"{cpu:.0%} of the time)")
    return result
