"""Fixtures of the fault tests: the web tests' live server, and copies of the tiny model
that a test may damage (the shared one is never touched)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tests.web.conftest import controller, live  # noqa: F401  (fixtures used here too)
from tuner.engine.weights import synth


@pytest.fixture
def model_copy(tiny_model, tmp_path) -> Path:
    return Path(shutil.copytree(tiny_model, tmp_path / "model"))


@pytest.fixture(scope="session")
def wide_model(tmp_path_factory) -> Path:
    """The demo model's expert shape in 4 layers x 32 experts: an arena of all 128 pairs is
    151 MB, large next to the process, so memory a rebuild keeps shows."""
    recipe = replace(synth.DEFAULT, name="strata-wide-4x32", vocab_size=512, num_layers=4,
                     num_experts=32, top_k=2, topics=8)
    return synth.write(recipe, tmp_path_factory.mktemp("models") / "wide")
