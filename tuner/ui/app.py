"""The Textual app: four screens over one backend, repainted on a timer.

Snapshots are never pushed into widgets as they arrive. A timer at `refresh_hz` takes the
newest snapshot from the backend and paints the visible screen with it, inside one batch
update, and only when something in it changed. The repaint rate, not the snapshot rate,
is what costs CPU, and in the embedded mode that CPU is the engine's.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import ClassVar, TypeVar

from textual.app import App, ScreenStackError
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.screen import Screen

from tuner.control.answers import KnobInfo, KnobValue
from tuner.control.api import Backend
from tuner.control.errors import BackendError
from tuner.control.models import SessionState, TuneRequest
from tuner.format import budgets_line
from tuner.ui import DEFAULT_REFRESH_HZ, FAILED, MAX_REFRESH_HZ, Failed
from tuner.ui.commands import BudgetCommands, KeyCommands, KnobCommands, PresetCommands
from tuner.ui.history import History
from tuner.ui.screens.base import SnapshotScreen
from tuner.ui.screens.experts import ExpertsScreen
from tuner.ui.screens.help import HelpScreen
from tuner.ui.screens.knobs import KnobsScreen
from tuner.ui.screens.layers import LayersScreen
from tuner.ui.screens.overview import OverviewScreen
from tuner.ui.screens.presets import PresetsScreen
from tuner.ui.screens.tune import TuneScreen
from tuner.ui.screens.tune_dialog import TuneDialog
from tuner.vocabulary.snapshot import Snapshot

T = TypeVar("T")


class NotifyHandler(logging.Handler):
    """Log records while the app owns the terminal: warnings and errors become
    notifications, the rest is dropped, so no log line is written across the screen (the
    HTTP client logs every request at INFO)."""

    def __init__(self, app: App):
        super().__init__(logging.WARNING)
        self.app = app

    def emit(self, record: logging.LogRecord) -> None:
        severity: SeverityLevel = "error" if record.levelno >= logging.ERROR else "warning"
        try:
            self.app.call_from_thread(self.app.notify, record.getMessage(),
                                      title=record.name, severity=severity, markup=False)
        except RuntimeError:  # on the app's own thread, or the app has stopped
            if self.app.is_running:
                self.app.notify(record.getMessage(), title=record.name, severity=severity,
                                markup=False)


def painted_as(snap: Snapshot, link: str) -> tuple:
    """What decides whether a screen needs painting again: new tokens, new settings, a
    changed state, a reset or a change of the connection."""
    return (snap["tokens"], snap["settings_version"],
            snap.get("pending_version"), snap["state"], snap.get("error"),
            snap["window"]["tokens"], link)


class TunerApp(App[int]):
    CSS_PATH = "tuner.tcss"
    TITLE = "tuner"
    MODES: ClassVar[dict[str, str | Callable[[], Screen]]] = {
        "overview": OverviewScreen,
        "layers": LayersScreen,
        "knobs": KnobsScreen,
        "presets": PresetsScreen,
        "experts": ExpertsScreen,
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "switch_mode('overview')", "Overview",
                tooltip="screen: headline figures, trends, the engine, recent changes"),
        Binding("2", "switch_mode('layers')", "Layers",
                tooltip="screen: every layer's counters, window or cumulative"),
        Binding("3", "switch_mode('knobs')", "Knobs", tooltip="screen: the settings form"),
        Binding("4", "switch_mode('presets')", "Presets",
                tooltip="screen: apply, save, diff presets; A/B of two"),
        Binding("5", "switch_mode('experts')", "Experts",
                tooltip="screen: hot experts (heat map) and hit rate over arena size"),
        Binding("t", "tune", "Tune", tooltip="tune: start one, or follow the one running"),
        Binding("p", "toggle_pause", "Pause", tooltip="pause or resume the decode loop"),
        Binding("r", "reset", "Reset", tooltip="zero the counters, cumulative and window"),
        Binding("question_mark,f1", "help", "Help",
                tooltip="help: keys, headline figures and layer columns"),
        Binding("q", "quit", "Quit", tooltip="quit the terminal UI"),
    ]
    COMMANDS = App.COMMANDS | {KeyCommands, KnobCommands, PresetCommands, BudgetCommands}

    def __init__(self, backend: Backend, refresh_hz: float = DEFAULT_REFRESH_HZ):
        if not 0 < refresh_hz <= MAX_REFRESH_HZ:
            raise ValueError(f"refresh_hz must be in (0, {MAX_REFRESH_HZ:g}], got {refresh_hz}")
        super().__init__()
        self.backend = backend
        self.refresh_hz = refresh_hz
        self.snapshot: Snapshot | None = None
        self.history = History()
        self.knob_specs: list[KnobInfo] = []
        # The settings the engine runs, from the newest snapshot or a change's answer.
        self.state = SessionState(version=0, settings={}, state="")
        self._painted: tuple | None = None
        self._log_handlers: list[logging.Handler] = []
        self.interrupted = False  # ended by SIGTERM: the command reports it as Ctrl-C
        self.failed: BackendError | None = None  # ended by the backend: the command says why

    def _terminate(self) -> None:
        self.interrupted = True
        self.exit()

    async def on_mount(self) -> None:
        # SIGTERM quits as the quit key does, restoring the terminal; a KeyboardInterrupt
        # raised inside Textual's loop would leave it in application mode.
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self._terminate)
        except (ValueError, RuntimeError):  # not the main thread: signals are not ours
            pass
        root = logging.getLogger()
        self._log_handlers, root.handlers = root.handlers, [NotifyHandler(self)]
        await self.backend.open()
        try:
            self.knob_specs = await self.backend.knobs()
            self.state = await self.backend.state()
        except BackendError as err:
            self.failed = err
            self.exit()
            return
        self.run_worker(self.backend.follow(), name="snapshots", group="snapshots")
        self.set_interval(1 / self.refresh_hz, self.repaint, name="repaint")
        await self.switch_mode("overview")

    async def on_unmount(self) -> None:
        asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
        await self.backend.close()
        logging.getLogger().handlers = self._log_handlers

    # -- painting ----------------------------------------------------------------------
    def repaint(self, force: bool = False) -> None:
        """Paints the visible screen with the newest snapshot (latest wins)."""
        # A screen is painted once it is mounted; a mode's screen is built on first use.
        try:
            screen = self.screen if self.screen.is_mounted else None
        except ScreenStackError:  # the app is closing: a last tick found no screen
            return
        snap = self.backend.latest()
        if snap is None:
            if isinstance(screen, SnapshotScreen):
                screen.waiting()
            return
        self.snapshot = snap
        self.history.record(snap)
        if snap["settings_version"] >= self.state.version:
            self.state = SessionState(version=snap["settings_version"],
                                      settings=snap["settings"], state=snap["state"])
        if not isinstance(screen, SnapshotScreen):
            return
        key = (screen, painted_as(snap, self.backend.link))
        if key == self._painted and not force:
            return
        self._painted = key
        with self.batch_update():
            try:
                screen.paint(snap)
            except NoMatches:  # the app is closing and took the screen's widgets away
                self._painted = None

    # -- actions -----------------------------------------------------------------------
    async def attempt(self, operation: Awaitable[T], failed: str = "",
                      passing: tuple[type[BackendError], ...] = ()) -> T | Failed:
        """What `operation` returns, or FAILED once its error was shown under the title
        `failed`; errors of the `passing` types are raised for the caller to handle."""
        try:
            return await operation
        except passing:
            raise
        except BackendError as err:
            self.notify(str(err), title=failed, severity="error", markup=False)
            return FAILED

    async def _report(self, operation: Awaitable[T], done: str | Callable[[T], str],
                      title: str = "") -> None:
        """Runs `operation`; notifies `done` (or what it makes of the result) or the error."""
        result = await self.attempt(operation, f"{title} failed" if title else "")
        if result is FAILED:
            return
        self.notify(done(result) if callable(done) else done, title=title, markup=False)
        self.repaint(force=True)

    def action_toggle_pause(self) -> None:
        if self.snapshot and self.snapshot["state"] == "paused":
            self.run_worker(self._report(self.backend.resume(), "resumed"))
        else:
            self.run_worker(self._report(self.backend.pause(), "paused"))

    def action_reset(self) -> None:
        self.run_worker(self._report(self.backend.reset(), "counters reset"))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_tune(self) -> None:
        self.run_worker(self._tune(), group="tune")

    async def _tune(self) -> None:
        """The running tune's screen, or the dialog that starts one."""
        job = await self.attempt(self.backend.tune_status(), "tune")
        if job is FAILED:
            return
        if job is not None and job.state in ("running", "stopping"):
            await self.push_screen(TuneScreen(job))
            return
        await self.push_screen(TuneDialog(), self._tune_answered)

    def _tune_answered(self, answer: TuneRequest | None) -> None:
        if answer:
            self.run_worker(self._start_tune(answer), group="tune")

    async def _start_tune(self, request: TuneRequest) -> None:
        job = await self.attempt(self.backend.start_tune(request), "tune not started")
        if job is not FAILED:
            await self.push_screen(TuneScreen(job))

    def apply_preset(self, name: str) -> None:
        self.run_worker(self._apply_preset(name), group="apply")

    async def _apply_preset(self, name: str) -> None:
        state = await self.attempt(self.backend.apply_preset(name), "preset not applied")
        if state is FAILED:
            return
        self.state = state
        self.notify(f"applied {name}: settings v{state.version}", title="preset",
                    markup=False)
        self.repaint(force=True)

    def apply_budgets(self, weights: str) -> None:
        self.run_worker(self._report(self.backend.window_budgets(weights, apply=True),
                                     budgets_line, "budgets"), group="apply")

    async def set_knob(self, name: str, value: KnobValue) -> None:
        await self.switch_mode("knobs")
        if isinstance(self.screen, KnobsScreen):
            self.screen.submit({name: value})

    async def edit_knob(self, name: str) -> None:
        await self.switch_mode("knobs")
        if isinstance(self.screen, KnobsScreen):
            self.screen.edit(name)


def create_app(backend: Backend, refresh_hz: float = DEFAULT_REFRESH_HZ) -> TunerApp:
    """The terminal UI over `backend`, repainting at most `refresh_hz` times a second."""
    return TunerApp(backend, refresh_hz)
