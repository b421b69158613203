"""Scratch: the throwaway `agree` predictor among the terminal form's choices."""
import pytest
from textual.widgets import Select

from tuner.ui.app import create_app

pytestmark = pytest.mark.anyio


async def test_the_terminal_form(embedded, controller):
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        select = app.screen.query_one("#knob-prefetch", Select)
        assert "agree" in [value for _, value in select._options]
