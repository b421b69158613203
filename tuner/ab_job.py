"""An A/B comparison started from a UI: two presets, run in the background while the live
session is paused (the runs must not share the machine with it), with progress to poll."""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from tuner.measure.ab import run_ab
from tuner.measure.compare import schedule

log = logging.getLogger(__name__)

PAIRS = (1, 8)  # allowed range of A B pairs before the sentinel
TOKENS = (8, 4096)  # allowed range of tokens per run
# What a UI offers first: the shipped baseline preset as A, 2 pairs of 64 tokens
BASELINE, DEFAULT_PAIRS, DEFAULT_TOKENS = "baseline", 2, 64


def check_counts(pairs: int, tokens: int) -> None:
    for name, value, (least, most) in (("pairs", pairs, PAIRS), ("tokens", tokens, TOKENS)):
        if not least <= value <= most:
            raise ValueError(f"{name} = {value}: must be from {least} to {most}")


@dataclass
class ABJob:
    a: str
    b: str
    pairs: int
    tokens: int
    total_runs: int
    state: str = "running"  # running, done or failed
    runs: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class ABRunner:
    """At most one A/B at a time, for one controller."""

    def __init__(self, controller):
        self.controller = controller
        self.job: ABJob | None = None
        self._lock = threading.Lock()

    def start(self, a: str, b: str, pairs: int = DEFAULT_PAIRS,
              tokens: int = DEFAULT_TOKENS) -> ABJob:
        """Raises PresetError for a preset that cannot be read, ValueError for counts out of
        range or while another A/B runs; nothing starts then."""
        check_counts(pairs, tokens)
        ctl = self.controller
        sa, sb = ctl.preset_settings(a), ctl.preset_settings(b)
        with self._lock:
            if self.job is not None and self.job.state == "running":
                raise ValueError(f"an A/B is already running ({self.job.a} vs {self.job.b})")
            if ctl.tune.busy:  # both pause the live session and want the machine alone
                raise ValueError(f"a tune is running (study {ctl.tune.job.study!r}); start "
                                 "the A/B once it is over")
            job = ABJob(a, b, pairs, tokens, total_runs=len(schedule(pairs)))
            self.job = job
        threading.Thread(target=self._run, args=(job, sa, sb), daemon=True,
                         name="tuner-ab").start()
        return job

    def _run(self, job: ABJob, sa, sb) -> None:
        session = self.controller.session
        was_running = session.state == "running"
        session.pause()
        try:
            job.result = run_ab(sa, sb, job.pairs, job.tokens,
                                progress=lambda i, n, run: job.runs.append(run))
            job.state = "done"
        except Exception as err:  # the job reports it; the live session carries on
            log.exception("A/B %s vs %s failed", job.a, job.b)
            job.error, job.state = f"{type(err).__name__}: {err}", "failed"
        finally:
            if was_running:
                session.resume()
