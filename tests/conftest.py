"""Shared fixtures: a tiny model made by the same generator as the demo model, a private
TUNER_HOME so tests never touch the user's presets or model cache, and a headless Chromium
for the browser tests (-m e2e)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import settings

from tuner.engine.weights import synth
from tuner.knobs import Config

PATIENT_S = 120.0  # how long a test's HTTP call waits for its answer (patient_http)

# Hypothesis's per-example deadline is a wall-clock limit: on a loaded machine a 0.1 ms
# example took 295 ms once. Timings belong to the perf marker, not to property tests.
settings.register_profile("tuner", deadline=None)
settings.load_profile("tuner")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked slow first (in their order), so that the workers of a parallel run
    (pytest -n) start them early and finish together, not one waiting on the last."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return synth.write(synth.TINY, tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="session")
def bf16_model(tmp_path_factory) -> Path:
    """The tiny model with bf16 weights, as `tuner model make` writes it."""
    from tuner.cli import main

    out = tmp_path_factory.mktemp("models") / "tiny-bf16"
    assert main(["model", "make", "--tiny", "--dtype", "bf16", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="session")
def small_model(tmp_path_factory) -> Path:
    """The demo model's layer shapes (D 256, I 384) in 3 layers x 8 experts: big enough for
    the CPU's vectorised matrix kernels, whose rounding depends on data alignment."""
    recipe = replace(synth.DEFAULT, name="strata-small-3x8", dtype="fp32", vocab_size=512,
                     num_layers=3, num_experts=8, top_k=2, topics=8)
    return synth.write(recipe, tmp_path_factory.mktemp("models") / "small")


@pytest.fixture(autouse=True)
def patient_http(monkeypatch) -> None:
    """httpx gives up on an answer after 5 s by default: a limit on how fast a loaded
    machine serves, which no test means to set. The tests' one-off calls wait two minutes
    unless they say otherwise (a timeout given is kept; a Client is given its own)."""
    import functools

    import httpx

    for name in ("get", "post", "put", "patch", "delete", "request"):
        monkeypatch.setattr(httpx, name, functools.partial(getattr(httpx, name),
                                                           timeout=PATIENT_S))


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
    from tuner.engine.session.session import Session

    s = Session(cfg)
    try:
        s.run(tokens)
        return s.snapshot()
    finally:
        s.engine.close()


@pytest.fixture
def run():
    return run_session


@pytest.fixture
def hold(monkeypatch):
    """`hold(module, name)`: calls of the function `module.name` wait for the Event it
    returns, so a job that calls it (an A/B's runs, a tune) stays running until the test
    sets it, whatever the machine's speed."""
    import threading

    def held(module, name: str) -> threading.Event:
        release, function = threading.Event(), getattr(module, name)
        monkeypatch.setattr(module, name,
                            lambda *args, **kwargs: release.wait(60) and function(*args,
                                                                                  **kwargs))
        return release

    return held


@pytest.fixture
def refuses(capsys):
    """`refuses(argv, pattern, status)`: the command line ends `argv` with `status` (bad
    input by default) and a last line on stderr, naming the command, that `pattern` finds;
    returns that line."""
    from tuner.cli import main
    from tuner.errors import Exit

    def check(argv: list[str], pattern: str, status: Exit = Exit.USAGE) -> str:
        assert main(argv) == status
        err = capsys.readouterr().err.strip()
        line = err.splitlines()[-1]
        assert line.startswith(f"tuner {argv[0]}") and re.search(pattern, line), err
        return line

    return check


CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update"]


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: apt-get install chromium")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def open_page(browser):
    """Opens the dashboard `width` pixels wide; fails the test on any page error or console
    error, except those matching `allowed` (regular expressions)."""
    from playwright.sync_api import expect

    pages, errors = [], []

    def open_(url: str, allowed: tuple[str, ...] = (), width: int = 1600):
        def console(m) -> None:
            if m.type == "error" and not any(re.search(a, m.text) for a in allowed):
                errors.append(f"console {m.type}: {m.text}")

        page = browser.new_page(viewport={"width": width, "height": 1000})
        page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        page.on("console", console)
        page.goto(url)
        expect(page.locator("#connection")).to_have_text("connected")
        pages.append(page)
        return page

    yield open_
    for page in pages:
        page.close()
    assert errors == []
