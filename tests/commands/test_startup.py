"""Starting the command line: a command that needs no engine starts without importing torch
(or the web server, the terminal UI, Optuna, SciPy), and a mistyped flag is answered with
the flag meant."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tuner.cli import main

HEAVY = ("torch", "fastapi", "uvicorn", "textual", "optuna", "scipy")
PROBE = """
import sys
from tuner.cli import main
try:
    status = main(sys.argv[1:])
except SystemExit as stop:
    status = stop.code
print("heavy:", [m for m in {heavy} if m in sys.modules], "status:", status)
"""


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["knobs"], ["presets", "list"],
                                  ["run", "--help"], ["presets", "diff", "2q"]])
def test_a_command_without_an_engine_imports_none_of_it(argv, tuner_home):
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv],
                         capture_output=True, text=True, timeout=120, check=False)
    took = time.monotonic() - started
    last = out.stdout.strip().splitlines()[-1]
    print(f"\ntuner {' '.join(argv)}: {took:.2f} s, {last}")
    assert last == "heavy: [] status: 0", out.stderr


def test_a_mistyped_flag_is_answered_with_the_flag_meant(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["run", "--moce-bonis", "0.85"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == ("tuner: error: unrecognized arguments: --moce-bonis 0.85; "
                                    "did you mean --moce-bonus?")
    with pytest.raises(SystemExit):
        main(["presets", "list", "--jsn", "--moce-bonus=1"])
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "did you mean --json?")  # a flag of `presets list`; the knob flag is not one of it


def test_a_flag_like_nothing_gets_no_guess(capsys):
    with pytest.raises(SystemExit):
        main(["knobs", "--zzzzzz"])
    assert capsys.readouterr().err.splitlines()[-1] == (
        "tuner: error: unrecognized arguments: --zzzzzz")


def test_the_terminal_ui_on_a_server_loads_no_engine():
    """`tuner tui --connect URL` runs the UI alone: what it imports must not bring torch."""
    code = ("import sys\nfrom tuner.commands import tui\nfrom tuner.ui.app import create_app\n"
            "from tuner.control.remote import RemoteBackend\n"
            "print([m for m in ('torch', 'fastapi', 'optuna', 'scipy') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "[]"
