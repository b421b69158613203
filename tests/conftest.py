"""Shared fixtures: a tiny model made by the same generator as the demo model, and a
private TUNER_HOME so tests never touch the user's presets or model cache."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tuner.engine import synth
from tuner.knobs import Config


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return synth.write(synth.TINY, tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="session")
def small_model(tmp_path_factory) -> Path:
    """The demo model's layer shapes (D 256, I 384) in 3 layers x 8 experts: big enough for
    the CPU's vectorised matrix kernels, whose rounding depends on data alignment."""
    recipe = replace(synth.DEFAULT, name="strata-small-3x8", dtype="fp32", vocab_size=512,
                     num_layers=3, num_experts=8, top_k=2, topics=8)
    return synth.write(recipe, tmp_path_factory.mktemp("models") / "small")


@pytest.fixture(autouse=True)
def tuner_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "tuner-home"
    monkeypatch.setenv("TUNER_HOME", str(home))
    for var in [v for v in __import__("os").environ if v.startswith("STRATA_")]:
        monkeypatch.delenv(var)
    return home


@pytest.fixture
def tiny_config(tiny_model) -> Config:
    """Engine settings for the tiny model: a 16-slot arena (a quarter of its pairs)."""
    return Config(model=str(tiny_model), expert_cache=16, io_workers=3, io_urgent=1)


@pytest.fixture
def tiny_overrides(tiny_model) -> dict:
    """The same as knob values, for settings.load / the REST API / CLI flags."""
    return {"model": str(tiny_model), "expert_cache": 16, "io_workers": 3, "io_urgent": 1}


def run_session(cfg: Config, tokens: int = 120) -> dict:
    """Decodes `tokens` tokens synchronously and returns the final snapshot."""
    from tuner.engine.session import Session

    s = Session(cfg)
    try:
        s.run(tokens)
        return s.snapshot()
    finally:
        s.engine.close()


@pytest.fixture
def run():
    return run_session
