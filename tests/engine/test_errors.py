"""The engine's user-facing errors share one base, and keep the types callers catch."""

from __future__ import annotations

import pytest

from tuner.engine.inputs import PathError
from tuner.engine.model_config import ModelError
from tuner.engine.opening import DeviceError
from tuner.engine.quant import QuantError
from tuner.engine.slots import QuotaError, check_quotas
from tuner.engine.store import ReadError
from tuner.engine.synth import RecipeError, shape
from tuner.engine.trace_format import TraceError
from tuner.engine.workload import WorkloadError
from tuner.errors import TunerError
from tuner.traces.budgets import BudgetError
from tuner.traces.importers import ImportFailed
from tuner.traces.replay import ReplayError


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
