"""Scratch: the throwaway tune field `sampler_seed` in both backends and the dialog."""
import pytest

from tests.ui.conftest import following

from tuner.control.models import TuneRequest
from tuner.ui.app import create_app
from tuner.ui.screens.tune_dialog import TuneDialog

pytestmark = pytest.mark.anyio


async def test_backends_and_dialog(remote, embedded, controller):
    for backend, seed in ((remote, 5), (embedded, 6)):
        async with following(backend):
            job = await backend.start_tune(TuneRequest(trials=1, tokens=8, sampler_seed=seed))
            assert job.sampler_seed == seed
        controller.tune.slot.join(120)
    app = create_app(embedded)
    async with app.run_test(size=(140, 44)) as pilot:
        await app.push_screen(TuneDialog())
        await pilot.pause()
        assert app.screen.query_one("#tune-sampler_seed") is not None
