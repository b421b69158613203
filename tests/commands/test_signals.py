"""SIGTERM stops a command as Ctrl-C does: its clean-up runs, what it measured is kept, and
it exits with 130. Each command runs as an operator runs it, in a process of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

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
    study = optuna.load_study(study_name="tune", storage=f"sqlite:///{storage}")
    states = {t.state for t in study.trials}
    assert optuna.trial.TrialState.RUNNING not in states and len(study.trials) >= 2
