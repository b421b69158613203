"""The one background job a running server allows at a time: an A/B or a tune.

Each measures on sessions of its own and must not share the machine with the live session
or with another job, so every job starts here: the slot refuses a second one with JobBusy,
pauses the live session before the start is answered, runs the job on a thread of its own
and resumes the live session (if it was running) when the job is over. A new kind of job
(a quality sweep, say) starts through `JobSlot.start` and is refused beside the others
without a line about them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from tuner.control.errors import JobBusy


class Job(Protocol):
    @property
    def kind(self) -> str:
        """How messages name the kind: "an A/B", "a tune"."""
        ...

    @property
    def label(self) -> str:
        """Which one it is, for messages: "baseline vs 2q"."""
        ...

    @property
    def busy(self) -> bool:
        """True until the job is over."""
        ...


class Pausable(Protocol):
    def pause(self) -> bool: ...

    def resume(self) -> None: ...


class JobSlot:
    def __init__(self, session: Pausable):
        self.session = session
        self._lock = threading.Lock()
        self.latest: dict[str, Job] = {}  # kind -> its latest job, running or over
        self._threads: list[threading.Thread] = []

    def start(self, job: Job, work: Callable[[], Job]) -> None:
        """Claims the slot for `job` and runs `work` on a thread of its own; `work` returns
        the job as it ended (the same object or a new one, which replaces it once the live
        session runs again, so no reader sees the job over while the session is still
        paused for it). Raises JobBusy while another job runs; nothing starts then."""
        with self._lock:
            running = next((j for j in self.latest.values() if j.busy), None)
            if running is not None:
                if running.kind == job.kind:
                    raise JobBusy(f"{job.kind} is already running ({running.label})")
                raise JobBusy(f"{running.kind} is running ({running.label}); start "
                              f"{job.kind} once it is over")
            self.latest[job.kind] = job
        # Paused before the start is answered: the runs never share the machine with it.
        was_running = self.session.pause()
        thread = threading.Thread(target=self._run, args=(work, was_running), daemon=True,
                                  name=f"tuner-job-{job.kind.split()[-1]}")
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def join(self, timeout: float) -> bool:
        """Waits up to `timeout` seconds for the running jobs to end; True when they did."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def _run(self, work: Callable[[], Job], was_running: bool) -> None:
        try:
            ended = work()  # a job reports its own failure; the live session carries on
        finally:
            if was_running:
                self.session.resume()
        self.latest[ended.kind] = ended
