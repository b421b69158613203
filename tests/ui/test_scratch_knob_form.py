"""Scratch: the throwaway `checkres_every` knob in the terminal's form."""
import pytest

from tuner.ui.app import create_app

pytestmark = pytest.mark.anyio


async def test_the_terminal_form(embedded, controller):
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        assert app.screen.query_one("#knob-checkres_every") is not None
