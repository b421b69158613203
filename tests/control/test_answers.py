"""The operations answer what tuner.control.api declares: each answer of a real Controller
on the tiny model has the keys of its TypedDict, and the REST route serves it as that
type. (The A/B's and the tune's status are checked where a job runs: tests/web.)"""

from __future__ import annotations

import time
from typing import get_type_hints

import pytest

from tests.control.shapes import assert_shaped, problems
from tests.ui.conftest import make_controller
from tuner.control.answers import ABStatus, Budgets, Curve, KnobInfo, PresetBody
from tuner.control.api import OPERATIONS
from tuner.presets import Store
from tuner.vocabulary.snapshot import Snapshot


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    from tuner.engine.weights import synth

    model = synth.write(synth.TINY, tmp_path_factory.mktemp("models") / "tiny")
    store = Store(user=tmp_path_factory.mktemp("presets"))
    controller = make_controller({"model": str(model), "expert_cache": 16, "io_workers": 3,
                                  "io_urgent": 1}, store)
    controller.session.start()
    deadline = time.monotonic() + 60
    while controller.session.tokens < 8:
        assert time.monotonic() < deadline, "the tiny model decoded no tokens"
        time.sleep(0.05)
    yield controller
    controller.close()


def answer(name: str):
    return get_type_hints(OPERATIONS[name].declared)["return"]


def test_the_snapshot_and_the_knob_table(controller):
    assert_shaped(controller.snapshot(), Snapshot)
    assert_shaped(controller.knobs(), answer("knobs"))
    assert answer("knobs") == list[KnobInfo]


def test_presets_their_diff_and_a_saved_one(controller):
    assert_shaped(controller.presets(), answer("presets"))
    assert_shaped(controller.preset("2q"), answer("preset"))
    assert_shaped(controller.diff_preset("2q"), answer("diff_preset"))
    assert_shaped(controller.save_preset("mine", "a test's"), PresetBody)
    controller.delete_preset("mine")
    assert "mine" not in {p["name"] for p in controller.presets()}


@pytest.mark.parametrize("weights", ["hits", "stall"])
def test_budgets_planned_and_applied(controller, weights):
    planned = controller.window_budgets(weights)
    assert_shaped(planned, Budgets)
    assert "version" not in planned
    applied = controller.window_budgets(weights, apply=True)
    assert_shaped(applied, Budgets)
    assert applied["version"] == controller.version


def test_the_live_curve(controller):
    deadline = time.monotonic() + 60
    while (curve := controller.curve()) is None:
        assert time.monotonic() < deadline, "no curve within a minute"
        time.sleep(0.2)
    assert_shaped(curve, Curve)
    assert "error" not in curve


def test_a_key_too_many_or_too_few_is_found():
    row = {"knob": "x", "env": "X", "a": 1, "b": 2}
    assert problems([row], answer("diff_preset")) == []
    assert problems([{**row, "c": 3}], answer("diff_preset")) == [
        "answer[0]: KnobDiff has undeclared ['c']"]
    assert problems({"error": "boom"}, Curve) == []  # a failed curve is its error alone
    assert problems({"sizes": [1]}, answer("window_budgets"))[0].startswith(
        "answer: Budgets lacks")
    job = ABStatus(a="baseline", b="2q", total_runs=3)
    assert problems(job, ABStatus) == problems(job.model_dump(mode="json"), ABStatus) == []
    assert problems({**job.model_dump(), "label": "x"}, ABStatus) == [
        "answer: ABStatus has undeclared ['label']"]
