"""SIGTERM stops a command as Ctrl-C does: its clean-up runs, what it measured is kept, and
it exits with 130. Each command runs as an operator runs it, in a process of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from tuner.cli import main

ROOT = Path(__file__).resolve().parents[2]


def tiny_flags(model) -> list[str]:
    return ["--model", str(model), "--expert-cache", "16", "--io-workers", "3",
            "--io-urgent", "1"]


def start(args: list[str], home: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tuner", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "TUNER_HOME": str(home)})


def stop_once(proc: subprocess.Popen, ready: str, sig: int) -> tuple[str, str]:
    """Sends `sig` once stderr shows `ready`; (stdout, stderr) when the process is gone."""
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if ready in line:
            break
    assert proc.poll() is None, "".join(seen)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return out, "".join(seen) + err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_an_ab_stopped_keeps_the_runs_it_measured(tiny_model, tuner_home, sig):
    proc = start(["ab", "baseline", "2q", "--pairs", "3", "--tokens", "24", "--warmup", "0",
                  *tiny_flags(tiny_model)], tuner_home)
    out, err = stop_once(proc, "run 1/7:", sig)
    assert proc.returncode == 130, err
    rows = [line.split() for line in out.splitlines()[1:]]
    assert rows and rows[0][:3] == ["1", "corpus", "A"]  # the measured run, with its figures
    assert f"tuner ab: interrupted after {len(rows)} of 7 measured runs" in err
    assert "Traceback" not in err


def test_ctrl_c_once_every_run_was_measured_keeps_the_verdict(tiny_model, monkeypatch,
                                                              capsys):
    """Ctrl-C landing after the last run (while the runs are compared, say) stops nothing
    that matters: the whole result is printed, with its verdict, and the command says it
    was interrupted."""
    from tuner.measure import ab

    compared = ab._compared

    def interrupted_once(*args):
        monkeypatch.setattr(ab, "_compared", compared)
        raise KeyboardInterrupt

    monkeypatch.setattr(ab, "_compared", interrupted_once)
    status = main(["ab", "baseline", "2q", "--pairs", "2", "--tokens", "16", "--warmup", "0",
                   *tiny_flags(tiny_model)])
    out, err = capsys.readouterr()
    assert status == 130 and "verdict: " in out and len(out.splitlines()) > 6
    assert "interrupted after every run was measured: the verdict stands" in err


def test_a_tune_stopped_by_sigterm_leaves_no_trial_running(tiny_model, tuner_home, tmp_path):
    storage = tmp_path / "tune.db"
    proc = start(["tune", "--trials", "40", "--tokens", "8", "--warmup", "4", "--storage",
                  str(storage), *tiny_flags(tiny_model)], tuner_home)
    # tqdm draws its bar with carriage returns: a finished trial shows as "1/40"
    buffer = ""
    while "1/40" not in buffer:
        char = proc.stderr.read(1)
        assert char, buffer
        buffer += char
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, buffer + err
    assert "(stopped early)" in out
    (only,) = optuna.get_all_study_summaries(f"sqlite:///{storage}")
    study = optuna.load_study(study_name=only.study_name, storage=f"sqlite:///{storage}")
    states = {t.state for t in study.trials}
    assert optuna.trial.TrialState.RUNNING not in states and len(study.trials) >= 2


def test_a_run_stopped_reports_the_tokens_it_decoded(tiny_model, monkeypatch, capsys):
    from tuner.engine.session.session import Session

    decode = Session.run

    def stopped(self, tokens, stop=None):
        decode(self, 12)
        raise KeyboardInterrupt

    monkeypatch.setattr(Session, "run", stopped)
    assert main(["run", "--tokens", "500", *tiny_flags(tiny_model)]) == 130
    out, err = capsys.readouterr()
    assert out.startswith("strata-tiny-4x16-v2: 12 tokens, ") and "output " in out
    assert "tuner run: interrupted after 12 of 500 tokens; the figures below are theirs" in err


def test_a_bench_stopped_prints_the_sections_it_measured(tiny_model, monkeypatch, capsys):
    from tuner.bench.sections import Section

    def measure(self, cfg, opts) -> dict:
        if self.name == "limit":
            raise KeyboardInterrupt
        return {"skipped": "measured here"}

    monkeypatch.setattr(Section, "measure", measure)
    assert main(["bench", "--only", "read,limit", *tiny_flags(tiny_model)]) == 130
    out, err = capsys.readouterr()
    assert "(a) read: measured here" in out and "(e) limit" not in out
    assert "tuner bench: interrupted in limit; the sections measured before it: read" in err


def test_a_bench_on_a_busy_machine_says_so(tiny_model, monkeypatch, capsys):
    from tuner.bench.sections import Section
    from tuner.commands import bench

    monkeypatch.setattr(Section, "measure", lambda self, cfg, opts: {"skipped": "-"})
    cores = bench.os.cpu_count() or 1
    monkeypatch.setattr(bench.os, "getloadavg", lambda: (3.0 * cores, 2.0, 1.0))
    assert main(["bench", "--only", "read", "--json", *tiny_flags(tiny_model)]) == 0
    out, err = capsys.readouterr()
    assert f"tuner bench: warning: the machine is busy (load average {3.0 * cores}" in err
    assert json.loads(out)["load"]["before"]["1min"] == 3.0 * cores
    monkeypatch.setattr(bench.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert main(["bench", "--only", "read", *tiny_flags(tiny_model)]) == 0
    assert "busy" not in capsys.readouterr().err
