"""An A/B comparison started from a UI: two presets, run in the background while the live
session is paused (the runs must not share the machine with it), with progress to poll."""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tuner.engine.workload import check as check_workload
from tuner.measure.compare import schedule
from tuner.measure.rules import check_limits, ruleset

log = logging.getLogger(__name__)

PAIRS = (1, 8)  # allowed range of A B pairs before the sentinel
TOKENS = (8, 4096)  # allowed range of tokens per run
# What a UI offers first: the shipped baseline preset as A, 2 pairs of 64 tokens
BASELINE, DEFAULT_PAIRS, DEFAULT_TOKENS = "baseline", 4, 64


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
    workloads: list[str] = field(default_factory=list)  # empty: the live settings' workload
    rules: str = ""  # a rule set of tuner.measure.rules, "" for none
    max_kl: float | None = None  # the quality gate (rules.py); None: not checked
    min_agreement: float | None = None
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
              tokens: int = DEFAULT_TOKENS, workloads: list[str] | None = None,
              rules: str = "", max_kl: float | None = None,
              min_agreement: float | None = None) -> ABJob:
        """Raises PresetError for a preset that cannot be read, WorkloadError for a workload
        that cannot be loaded, ValueError for counts or quality limits out of range, an
        unknown rule set or while another A/B runs; nothing starts then."""
        check_counts(pairs, tokens)
        check_limits(max_kl, min_agreement)
        workloads = list(workloads or [])
        for name in workloads:
            check_workload(name)
        ruleset(rules)
        ctl = self.controller
        sa, sb = ctl.preset_settings(a), ctl.preset_settings(b)
        with self._lock:
            if self.job is not None and self.job.state == "running":
                raise ValueError(f"an A/B is already running ({self.job.a} vs {self.job.b})")
            if ctl.tune.busy:  # both pause the live session and want the machine alone
                raise ValueError(f"a tune is running (study {ctl.tune.job.study!r}); start "
                                 "the A/B once it is over")
            job = ABJob(a, b, pairs, tokens,
                        total_runs=len(schedule(pairs)) * max(1, len(workloads)),
                        workloads=workloads, rules=rules, max_kl=max_kl,
                        min_agreement=min_agreement)
            self.job = job
        # Paused before the reply, so the runs never share the machine with the session.
        was_running = self.controller.session.pause()
        threading.Thread(target=self._run, args=(job, sa, sb, was_running), daemon=True,
                         name="tuner-ab").start()
        return job

    def _run(self, job: ABJob, sa, sb, was_running: bool) -> None:
        # Here, not at the top: the terminal UI reads this module's defaults for its A/B
        # dialog, and connected to a server it runs no engine, so it never loads torch.
        from tuner.measure.ab import run_ab

        session = self.controller.session
        try:
            result = run_ab(sa, sb, job.pairs, job.tokens,
                            progress=lambda i, n, run: job.runs.append(run),
                            workloads=job.workloads, rules=job.rules, max_kl=job.max_kl,
                            min_agreement=job.min_agreement)
            end = {"result": result, "state": "done"}
        except Exception as err:  # the job reports it; the live session carries on
            log.exception("A/B %s vs %s failed", job.a, job.b)
            end = {"error": f"{type(err).__name__}: {err}", "state": "failed"}
        finally:
            if was_running:
                session.resume()
        # One assignment: a reader sees the job running or ended, never a verdict in a
        # running job, and by then the live session runs again.
        self.job = replace(job, **end)
