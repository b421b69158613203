"""A tune on a server that stops: SIGTERM leaves no trial running in the study (as `tuner
tune` on Ctrl-C), a restarted server lists the stopped tune instead of answering 404, and a
tune whose study database cannot be written fails with one log line."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import optuna

from tests.faults.test_serve_process import ROOT, until
from tuner.web.local import listening_socket


def serve(model: Path, home: Path, log: Path) -> tuple[subprocess.Popen, str]:
    with listening_socket() as sock:
        port = sock.getsockname()[1]
    with open(log, "a") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tuner.cli", "serve", "--port", str(port), "--model",
             str(model), "--expert-cache", "4", "--io-workers", "3", "--io-urgent", "1"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True,
            env={**os.environ, "TUNER_HOME": str(home)})
    assert "at http://" in proc.stdout.readline()
    return proc, f"http://127.0.0.1:{port}"


def running_trials(home: Path) -> list[int]:
    storage = f"sqlite:///{home / 'tune.db'}"
    [name] = optuna.get_all_study_names(storage)
    study = optuna.load_study(study_name=name, storage=storage)
    return [t.number for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]


def test_sigterm_fails_the_running_trial_and_a_restart_lists_the_tune(model_copy, tuner_home,
                                                                    tmp_path):
    log = tmp_path / "serve.log"
    proc, url = serve(model_copy, tuner_home, log)
    try:
        started = httpx.post(f"{url}/api/tune", json={"trials": 50, "tokens": 256},
                             timeout=30).json()
        until(lambda: httpx.get(f"{url}/api/tune").json()["running"] is not None,
              "a running trial")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 130  # as Ctrl-C ends it
    finally:
        if proc.poll() is None:
            proc.kill()
    assert running_trials(tuner_home) == []
    proc, url = serve(model_copy, tuner_home, log)
    try:
        r = httpx.get(f"{url}/api/tune", timeout=30)
        assert r.status_code == 200, r.text
        job = r.json()
        assert (job["study"], job["state"], job["trials"]) == (started["study"], "stopped", 50)
        assert job["rows"] and job["rows"][-1]["state"] == "fail" and job["running"] is None
        assert "stopped before it finished" in job["error"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert "Traceback" not in log.read_text()


def test_a_study_database_that_cannot_be_written_is_one_log_line(live, tuner_home, caplog):
    (tuner_home / "tune.db").mkdir(parents=True)  # a folder where the database would be
    caplog.set_level(logging.DEBUG, "tuner.control.tune")
    r = httpx.post(f"{live.url}/api/tune", json={"trials": 2, "tokens": 8}, timeout=30)
    assert r.status_code == 202, r.text
    job = until(lambda: (j := httpx.get(f"{live.url}/api/tune").json())["state"] == "failed"
                and j, "the tune failing")
    assert job["error"].startswith("the study database failed: OperationalError: ")
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None, errors
    assert "\n" not in errors[0].getMessage() and job["error"] in errors[0].getMessage()
