"""The engine's user-facing errors share one base, and keep the types callers catch."""

from __future__ import annotations

import pytest

from tuner.engine.memory.store import ReadError
from tuner.engine.session.opening import DeviceError
from tuner.engine.weights.quant import QuantError
from tuner.engine.weights.synth import RecipeError, shape
from tuner.errors import TunerError
from tuner.traces.budgets import BudgetError
from tuner.traces.importers import ImportFailed
from tuner.traces.replay import ReplayError
from tuner.vocabulary.inputs import PathError
from tuner.vocabulary.model_config import ModelError
from tuner.vocabulary.slots import QuotaError, check_quotas
from tuner.vocabulary.trace_format import TraceError
from tuner.vocabulary.workload import WorkloadError


@pytest.mark.parametrize("error, kept", [
    (ModelError, ValueError), (PathError, ValueError), (TraceError, ValueError),
    (ImportFailed, TraceError), (WorkloadError, ValueError), (ReadError, OSError),
    (BudgetError, ValueError), (QuotaError, ValueError), (DeviceError, ValueError),
    (RecipeError, ValueError), (QuantError, ValueError), (ReplayError, ValueError),
])
def test_every_engine_error_is_a_tuner_error_and_what_it_was(error, kept):
    assert issubclass(error, TunerError) and issubclass(error, kept)


def test_an_error_is_one_line_naming_what_is_allowed():
    with pytest.raises(TunerError) as err:
        check_quotas([1, 2], 3, 3, "budgets")
    assert str(err.value) == ("budgets: 2 quotas for a model of 3 layers; give one slot "
                              "count per layer, layers 0..2")
    with pytest.raises(TunerError, match=r"^layers = 99: olmoe has 1 to 16$"):
        shape("olmoe", 99)
