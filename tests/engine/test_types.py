"""The engine type-checks: mypy, configured in pyproject.toml, finds nothing in tuner/engine
(and in what it imports: tuner.config, tuner.knobs, tuner.errors)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # half a minute without mypy's cache
def test_mypy_finds_nothing_in_the_engine():
    out = subprocess.run([sys.executable, "-m", "mypy", "tuner/engine"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
