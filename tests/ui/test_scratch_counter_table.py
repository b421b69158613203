"""Scratch: the throwaway `pf_named` counter in the terminal's layer table and help."""
from functools import partial

import pytest

from tests.ui.conftest import until
from tuner.ui.app import create_app
from tuner.ui.screens.help import column_table
from tuner.ui.widgets.layer_table import LayerTable

pytestmark = pytest.mark.anyio


async def test_the_layer_table_and_help(embedded, controller):
    app = create_app(embedded, refresh_hz=4)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        table = app.screen.query_one(LayerTable)
        await partial(until, pause=pilot.pause)(lambda: table.text(0, "hit_rate") != "")
        await pilot.press("p", "c")  # paused, the expert counts
        await pilot.pause()
        assert table.text(1, "pf_named") != ""
    assert "pf_named" in column_table().columns[0]._cells  # the help's layer columns
