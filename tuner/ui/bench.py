"""What the terminal UI costs the engine it shows, embedded and connected.

Embedded, the engine and the UI share one process and one GIL, so every repaint takes
time from decoding. Connected, the UI is a process of its own on the same machine (the
usual case over SSH): the server encodes and sends snapshots, and the UI's process
competes with the engine for the cores.

`measure_ui_overhead` times the same work again and again: a fresh session from the same
settings decodes the same tokens, with no UI, with the embedded UI on each screen and with
the connected UI on each screen, alternated `rounds` times (the UI phases in a rotated
order each round). How fast an engine decodes
depends on what it decodes (misses, prompt boundaries), so only identical spans compare;
each UI phase is compared with the phases without a UI before and after it, so a drift of
the machine's speed touches both sides of every ratio alike.

The apps run on `SinkDriver` (tuner.ui.bench_client), which takes what a terminal would
get and drops it: a headless app skips encoding its screen updates for the terminal, a
large part of what a repaint costs.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.bench.sections import Options
from tuner.config import Config
from tuner.control.compose import open_controller
from tuner.control.controller import Controller
from tuner.control.embedded import EmbeddedBackend
from tuner.engine.session.session import Session
from tuner.knobs import config_dict
from tuner.settings import Settings, validate
from tuner.ui import DEFAULT_REFRESH_HZ
from tuner.ui.bench_client import SinkDriver, attach
from tuner.web.app import create_app as create_web_app
from tuner.web.local import serve_in_thread

MODES = ("embedded", "connected")
SCREENS = ("overview", "layers")
WARM = 32  # tokens decoded before the clock runs: the arena fills, the UI settles

Probe = Callable[[], tuple[float, float]]  # the UI's CPU seconds and terminal output so far


@dataclass
class Phase:
    tokens: int
    wall: float
    cpu: float  # the UI's CPU seconds
    chars: float  # what the UI wrote to its terminal

    @property
    def rate(self) -> float:
        return self.tokens / self.wall


def _no_ui() -> tuple[float, float]:
    return 0.0, 0.0


def _span(session: Session, tokens: int, probe: Probe) -> Phase:
    """Starts `session` and times its tokens WARM + 1 to WARM + `tokens`."""

    def reach(n: int) -> None:
        if not session.wait_tokens(n, timeout=600):
            raise RuntimeError(f"the engine stopped before token {n}: {session.error}")

    session.start()
    reach(WARM)
    cpu, chars = probe()
    t0 = time.perf_counter()
    reach(WARM + tokens)
    wall = time.perf_counter() - t0
    cpu2, chars2 = probe()
    return Phase(tokens, wall, cpu2 - cpu, chars2 - chars)


def _embedded(session: Session, controller: Controller, screen: str, tokens: int,
              refresh_hz: float, size: tuple[int, int]) -> Phase:
    # the app's loop runs on this thread: its CPU time is the UI's
    clock = time.pthread_getcpuclockid(threading.get_ident())
    phase: list[Phase] = []

    def probe() -> tuple[float, float]:
        return time.clock_gettime(clock), SinkDriver.written

    async def during() -> None:
        phase.append(await asyncio.to_thread(_span, session, tokens, probe))

    asyncio.run(attach(EmbeddedBackend(controller), screen, refresh_hz, size, during))
    return phase[0]


class ConnectedUI:
    """The UI in a process of its own (`python -m tuner.ui.bench_client`)."""

    def __init__(self, refresh_hz: float, size: tuple[int, int]):
        self.errors = tempfile.TemporaryFile("w+")  # a pipe nobody reads could fill up
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tuner.ui.bench_client", str(refresh_hz),
             f"{size[0]}x{size[1]}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors, text=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both PIPEs
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout

    def ask(self, command: str) -> str:
        self.stdin.write(command + "\n")
        self.stdin.flush()
        line = self.stdout.readline()
        if not line:
            self.proc.wait(timeout=10)
            self.errors.seek(0)
            raise RuntimeError(f"the connected UI ended (exit {self.proc.returncode}): "
                               f"{self.errors.read()[-2000:]}")
        return line.strip()

    def probe(self) -> tuple[float, float]:
        cpu, chars = self.ask("probe").split()
        return float(cpu), float(chars)

    def phase(self, session: Session, controller: Controller, screen: str,
              tokens: int) -> Phase:
        with serve_in_thread(create_web_app(controller)) as url:
            self.ask(f"open {url} {screen}")
            try:
                return _span(session, tokens, self.probe)
            finally:
                self.ask("close")

    def close(self) -> None:
        self.stdin.close()
        self.proc.wait(timeout=30)
        self.errors.close()


def measure_ui_overhead(settings: Settings, tokens: int = 160, rounds: int = 4,
                        refresh_hz: float = DEFAULT_REFRESH_HZ,
                        screens: Sequence[str] = SCREENS, modes: Sequence[str] = MODES,
                        size: tuple[int, int] = (160, 50)) -> dict[str, Any]:
    """Fresh sessions with `settings` decode WARM + `tokens` tokens each, timed over the
    last `tokens`: with no UI and with the UI of each of `modes` on each of `screens`,
    `rounds` times, then once more with no UI. Each mode and screen gets the median of
    its rounds' ratios (a burst of other work on the machine slows one phase, not all),
    each round's ratio, the UI's share of a core and what it wrote to the terminal."""
    unknown = set(modes) - set(MODES)
    if unknown or not modes:
        raise ValueError(f"modes must be some of {', '.join(MODES)}, got {list(modes)}")
    if tokens < 1 or rounds < 1:
        raise ValueError(f"tokens and rounds must be >= 1, got {tokens} and {rounds}")
    model: dict[str, Any] = {}

    def phase(mode: str | None, screen: str = "") -> Phase:
        controller = open_controller(settings, start=False)  # as `tuner serve` builds it
        session = controller.session
        model.update(model=session.ckpt.name, layers=session.ckpt.config.num_layers)
        try:
            if mode == "embedded":
                return _embedded(session, controller, screen, tokens, refresh_hz, size)
            if mode == "connected":
                assert ui is not None  # made when the modes name it
                return ui.phase(session, controller, screen, tokens)
            return _span(session, tokens, _no_ui)
        finally:
            session.stop()

    ui = ConnectedUI(refresh_hz, size) if "connected" in modes else None
    alone: list[Phase] = []
    runs: list[dict[tuple[str, str], Phase]] = []
    try:
        order = [(m, s) for m in modes for s in screens]
        phase(None)  # unmeasured: the first session reads the model from a cold page cache
        for r in range(rounds):
            alone.append(phase(None))
            # each round starts at another UI phase, so no phase always runs first or last
            turn = r % len(order)
            runs.append({key: phase(*key) for key in order[turn:] + order[:turn]})
        alone.append(phase(None))
    finally:
        if ui is not None:
            ui.close()
    rates = [p.rate for p in alone]
    result: dict[str, Any] = {
        **model, "refresh_hz": refresh_hz,
        "size": f"{size[0]}x{size[1]}", "tokens": tokens, "rounds": rounds,
        "alone_tok_s": [round(r, 2) for r in rates], "drift": round(rates[-1] / rates[0] - 1, 4)}
    for mode in modes:
        result[mode] = {}
        for screen in screens:
            phases = [run[mode, screen] for run in runs]
            # each phase against the phases without a UI before and after it
            ratios = [p.rate / ((rates[i] + rates[i + 1]) / 2) for i, p in enumerate(phases)]
            wall = sum(p.wall for p in phases)
            result[mode][screen] = {
                "tok_s": round(sum(p.tokens for p in phases) / wall, 2),
                "ratio": round(statistics.median(ratios), 3),
                "ratios": [round(r, 3) for r in ratios],
                "ui_cpu": round(sum(p.cpu for p in phases) / wall, 3),
                "terminal_kib_s": round(sum(p.chars for p in phases) / wall / 1024, 1)}
    return result


def lines(result: dict[str, Any]) -> list[str]:
    """`measure_ui_overhead`'s figures as text."""
    alone = ", ".join(f"{r:.1f}" for r in result["alone_tok_s"])
    out = [f"{result['model']} ({result['layers']} layers): engine alone {alone} tok/s "
           f"over the run (drift {result['drift']:+.1%}); the UI at "
           f"{result['refresh_hz']:g} Hz on {result['size']}, {result['rounds']} rounds of "
           f"{result['tokens']} tokens a phase"]
    for mode in MODES:
        for screen, f in result.get(mode, {}).items():
            out.append(f"{mode:>9} on {screen:<8}: {f['tok_s']:.1f} tok/s, ratio "
                       f"{f['ratio']:.3f} (rounds {', '.join(map(str, f['ratios']))}); UI "
                       f"{f['ui_cpu']:.0%} of a core, {f['terminal_kib_s']:g} KiB/s to the "
                       "terminal")
    return out


def measure(cfg: Config, tokens: int, opts: Options) -> dict[str, Any]:
    """`tuner bench`'s ui section (tuner.bench.sections names it)."""
    return measure_ui_overhead(validate(config_dict(cfg)), tokens=tokens, rounds=opts.rounds)


def text(result: dict[str, Any]) -> str:
    return "ui: " + "\n    ".join(lines(result))
