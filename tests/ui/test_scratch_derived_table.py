"""Scratch: the throwaway derived `evictions_per_token` in the terminal's table and help."""
from functools import partial

import pytest

from tests.ui.conftest import until
from tuner.format import COLUMN_SETS
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
        for _ in COLUMN_SETS:  # `c` steps through the column sets to the one it is in
            if "evictions_per_token" in [c.name for c in table.shown_columns]:
                break
            await pilot.press("c")
            await pilot.pause()
        await partial(until, pause=pilot.pause)(
            lambda: table.text(0, "evictions_per_token") != "")
    assert "evictions_per_token" in column_table().columns[0]._cells
