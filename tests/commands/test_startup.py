"""Starting the command line: a command that needs no engine starts without importing torch
(or the web server, the terminal UI, Optuna, SciPy), a bad value is answered before any of
it loads, and a mistyped flag is answered with the command's usage and the flag meant."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from tuner.cli import COMMANDS, build_parser, main

HEAVY = ("torch", "fastapi", "uvicorn", "textual", "optuna", "scipy")
PROBE = """
import sys
from tuner.cli import COMMANDS, build_parser, main
try:
    status = main(sys.argv[1:])
except SystemExit as stop:
    status = stop.code
print("heavy:", [m for m in {heavy} if m in sys.modules], "status:", status)
"""


def probe(argv: list[str]) -> tuple[str, str]:
    """(the probe's last line: heavy modules loaded and the status, stderr)."""
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv],
                         capture_output=True, text=True, timeout=120, check=False)
    last = out.stdout.strip().splitlines()[-1]
    print(f"\ntuner {' '.join(argv)}: {time.monotonic() - started:.2f} s, {last}")
    return last, out.stderr


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["knobs"], ["presets", "list"],
                                  ["run", "--help"], ["presets", "diff", "2q"],
                                  ["presets", "export", "2q", "--format", "llama.cpp"]])
def test_a_command_without_an_engine_imports_none_of_it(argv, tuner_home):
    last, err = probe(argv)
    assert last == "heavy: [] status: 0", err


@pytest.mark.parametrize("argv, says", [
    (["run", "--cache-policy", "bogus"], "tuner run: cache_policy"),
    (["bench", "--only", "read", "--tokens", "0"], "tuner bench: --tokens must be >= 1"),
    (["tui", "--expert-cache", "-1"], "tuner tui: expert_cache"),
    (["serve", "--port", "99999"], "a port is a number from 0 to 65535 .*, got '99999'"),
    (["ab", "baseline", "2q", "--pairs", "9"], "tuner ab: pairs = 9: must be from 1 to 8"),
    (["tune", "--save-best", "x", "--ab-tokens", "4"], "tuner tune: the closing A/B"),
    (["model", "make", "--dtype", "fp8"], "argument --dtype: invalid choice: 'fp8'"),
    (["trace", "record", "-o", "x.npz", "--tokens", "0"], "tuner trace record: --tokens"),
])
def test_a_bad_value_is_answered_before_anything_heavy_loads(argv, says, tuner_home):
    last, err = probe(argv)
    assert last == "heavy: [] status: 2" and re.search(says, err), err


def test_a_mistyped_flag_is_answered_with_the_flag_meant(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["run", "--moce-bonis", "0.85"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == ("tuner run: error: unrecognized arguments: --moce-bonis "
                                    "0.85; did you mean --moce-bonus?")
    assert err.startswith("usage: tuner run [-h]") and "[--KNOB VALUE ...]" in err
    with pytest.raises(SystemExit):
        main(["presets", "list", "--jsn", "--moce-bonus=1"])
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "did you mean --json?")  # a flag of `presets list`; the knob flag is not one of it


def test_a_flag_like_nothing_gets_no_guess(capsys):
    with pytest.raises(SystemExit):
        main(["knobs", "--zzzzzz"])
    assert capsys.readouterr().err.splitlines()[-1] == (
        "tuner knobs: error: unrecognized arguments: --zzzzzz")


def test_a_subcommand_mistake_shows_the_subcommands_usage(capsys):
    """Not the top level's, whose --version would be the closest flag to --json."""
    with pytest.raises(SystemExit):
        main(["presets", "show", "2q", "--json"])
    err = capsys.readouterr().err.splitlines()
    assert err == ["usage: tuner presets show [-h] name",
                   "tuner presets show: error: unrecognized arguments: --json"]


def test_the_help_names_every_verb_of_presets():
    presets = build_parser(["presets"])._subparsers._group_actions[0].choices["presets"]
    verbs = presets._subparsers._group_actions[0].choices
    assert set(verbs) == {"list", "show", "diff", "save", "export", "import", "apply"}
    assert all(verb in COMMANDS["presets"][1] for verb in verbs), COMMANDS["presets"][1]


def test_the_terminal_ui_on_a_server_loads_no_engine():
    """`tuner tui --connect URL` runs the UI alone: what it imports must not bring torch."""
    code = ("import sys\nfrom tuner.commands import tui\nfrom tuner.ui.app import create_app\n"
            "from tuner.control.remote import RemoteBackend\n"
            "print([m for m in ('torch', 'fastapi', 'optuna', 'scipy') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "[]"
