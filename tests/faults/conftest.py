"""Fixtures of the fault tests: the web tests' live server, and copies of the tiny model
that a test may damage (the shared one is never touched)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.web.conftest import controller, live  # noqa: F401  (fixtures used here too)


@pytest.fixture
def model_copy(tiny_model, tmp_path) -> Path:
    return Path(shutil.copytree(tiny_model, tmp_path / "model"))
