"""mypy finds nothing to report in the vocabulary, the engine, the control plane, the web
app and the terminal UI (tuner/vocabulary, tuner/engine, tuner/control, tuner/web and
tuner/ui: pyproject.toml's [tool.mypy] names the folders it checks and why some imports
are read as Any)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # half a minute on a cold cache; the cache (.mypy_cache) makes it seconds
def test_mypy_is_clean_on_the_engine_the_control_plane_and_its_views():
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
