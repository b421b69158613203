"""The app driven as an operator drives it: keys, clicks and typing through the Pilot."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from functools import partial

import pytest
from textual.command import CommandList, CommandPalette
from textual.widgets import DataTable, Input, Label, Static

from tests.ui.conftest import until
from tuner.control.errors import Unreachable
from tuner.control.remote import RemoteBackend
from tuner.format import COLUMN_SETS
from tuner.settings import SettingsError, apply
from tuner.ui.app import create_app
from tuner.ui.screens.dialog import Confirm
from tuner.ui.screens.help import HelpScreen
from tuner.ui.screens.knobs import KnobsScreen
from tuner.ui.screens.save_preset import SavePresetScreen
from tuner.ui.widgets.knob_field import KnobField
from tuner.ui.widgets.layer_table import LayerTable
from tuner.ui.widgets.readout import Readout
from tuner.ui.widgets.status import StatusLine
from tuner.web.app import create_app as create_web_app
from tuner.web.local import listening_socket, serve_in_thread

pytestmark = pytest.mark.anyio
SIZE = (140, 44)


# The Pilot waits after each key until the process is idle, which a decoding engine
# never is (up to a second a key), so tests that only edit settings pause the engine:
# a paused session still applies settings.


async def type_into(pilot, selector: str, text: str) -> None:
    """Focuses a field (which selects its text) and types `text` over it, then enter."""
    pilot.app.screen.query_one(selector).focus()
    await pilot.pause()
    await pilot.press(*text, "enter")


async def test_toggling_a_switch_and_changing_the_bonus_change_the_settings_version(
        embedded, controller):
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        wait = partial(until, pause=pilot.pause)
        await pilot.press("3")
        await pilot.pause()
        assert isinstance(app.screen, KnobsScreen)
        first = controller.version

        await pilot.click("#knob-prefetch_touch")
        await wait(lambda: controller.version == first + 1)
        assert controller.settings.prefetch_touch is True

        await type_into(pilot, "#knob-moce_bonus", "0.85")
        await wait(lambda: controller.version == first + 2)
        assert controller.settings.moce_bonus == 0.85
        status = app.screen.query_one("#status", Static)
        await wait(lambda: f"settings v{first + 2}" in str(status.render()))


async def test_an_invalid_value_shows_the_engine_message_and_changes_nothing(
        embedded, controller):
    with pytest.raises(SettingsError) as engine:
        apply(controller.settings, {"moce_bonus": 99.0})
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await pilot.pause()
        version, settings = controller.version, controller.settings
        field = app.screen.query_one("#field-moce_bonus", KnobField)

        await type_into(pilot, "#knob-moce_bonus", "99")
        await until(lambda: field.has_class("-rejected"), pause=pilot.pause)
        shown = str(field.query_one(".knob-problem", Static).render())
        assert shown == engine.value.problems["moce_bonus"]
        assert "moce_bonus (STRATA_METAL_MOCE_BONUS) = 99.0" in shown
        assert field.query_one(Input).value == "0.0"  # back to what the engine runs
        assert controller.version == version and controller.settings == settings

        # a rule across knobs is shown above the form
        await type_into(pilot, "#knob-io_urgent", "5")
        problem = app.screen.query_one("#form-problem", Static)
        await until(lambda: "io_urgent (5) must be less than io_workers (3)"
                    in str(problem.render()), pause=pilot.pause)
        assert app.screen.query_one("#knob-io_urgent", Input).value == "1"
        assert controller.version == version


async def fill_save_dialog(pilot, name: str, description: str = "") -> None:
    """Types into the save dialog, its name field focused: the description only once the
    name's enter has moved focus to it, since keys that reach the presets screen below
    apply (a), diff (d) and save (s)."""
    app = pilot.app
    await pilot.press(*name, "enter")
    await until(lambda: app.focused is app.screen.query_one("#preset-description", Input),
                pause=pilot.pause)
    await pilot.press(*description, "enter")


async def run_command(pilot, query: str, expect: str | None = None) -> None:
    """Runs the command the palette ranks first for `query`, once the search for the whole
    query is over and that command's prompt holds `expect` (default: the query)."""
    app = pilot.app
    await pilot.press("ctrl+p")
    palette = await until(lambda: isinstance(app.screen, CommandPalette) and app.screen,
                          pause=pilot.pause)
    await pilot.press(*query)
    commands = palette.query_one(CommandList)

    def ranked() -> bool:
        searching = any(w.group == CommandPalette._GATHER_COMMANDS_GROUP and not w.is_finished
                        for w in app.workers)
        first = commands.highlighted
        return (not searching and first is not None and palette.query_one(Input).value == query
                and (expect or query) in commands.get_option_at_index(first).prompt.plain)

    await until(ranked, pause=pilot.pause)
    await pilot.press("enter")


async def test_saving_and_applying_a_preset_round_trips(embedded, controller):
    controller.session.pause()
    controller.change({"moce_bonus": 0.85, "prefetch": "stale"})
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        wait = partial(until, pause=pilot.pause)
        await pilot.press("4")
        await pilot.pause()
        presets = app.screen.query_one("#preset-list", DataTable)
        await wait(lambda: presets.row_count > 0)

        await pilot.press("s")
        # type only once the dialog's name field has focus, or keys go to the screen below
        await wait(lambda: isinstance(app.screen, SavePresetScreen)
                   and app.focused is app.screen.query_one("#preset-name", Input))
        await fill_save_dialog(pilot, "mine", "bonus and stale")
        await wait(lambda: "mine" in [k.value for k in presets.rows])
        assert app.screen.selected == "mine"

        controller.change({"moce_bonus": 0.0, "prefetch": "off"})
        await pilot.press("d")
        diff = app.screen.query_one("#preset-diff", DataTable)
        await wait(lambda: diff.row_count == 2)
        assert {diff.get_row_at(i)[0] for i in range(2)} == {"moce_bonus", "prefetch"}

        version = controller.version
        await pilot.press("a")
        await wait(lambda: controller.version > version)
        assert controller.settings.moce_bonus == 0.85
        assert controller.settings.prefetch == "stale"


def cells(table: LayerTable) -> list[str]:
    return [text for layer in table.rows for text in table.texts(layer)]


def column_names(table: LayerTable) -> list[str]:
    return [c.name for c in table.shown_columns]


async def test_the_layer_table_fills_updates_toggles_and_sorts(embedded, controller):
    layers = controller.session.ckpt.config.num_layers
    app = create_app(embedded, refresh_hz=4)
    async with app.run_test(size=SIZE) as pilot:
        wait = partial(until, pause=pilot.pause)
        await pilot.press("2")
        await pilot.pause()
        table = app.screen.query_one(LayerTable)
        await wait(lambda: table.row_count == layers and table.text(0, "hit_rate") != "")
        assert table.rows == list(range(layers))
        assert column_names(table)[:2] == ["layer", "hit_rate"]  # the rates come first
        first = cells(table)
        await wait(lambda: cells(table) != first)  # the window moves with the engine

        await pilot.press("p")  # a paused engine holds still while the table is checked
        await wait(lambda: app.snapshot["state"] == "paused")
        await pilot.press("w", "c")
        caption = app.screen.query_one("#layers-caption", Readout)
        await wait(lambda: "cumulative" in str(caption.render()))
        assert "columns in experts" in str(caption.render())
        assert {"lookups", "hits", "sync_misses"} <= set(column_names(table))
        shown = int(table.text(0, "lookups").replace(",", ""))
        assert shown == app.snapshot["layers"][0]["lookups"]

        table.focus()
        table.move_cursor(column_names(table).index("hits"))
        await pilot.press("s")
        hits = {r["layer"]: r["hits"] for r in app.snapshot["layers"]}
        assert [hits[layer] for layer in table.rows] == sorted(hits.values(), reverse=True)
        assert "sorted by hits, largest first" in str(caption.render())
        await pilot.press("s")
        assert [hits[layer] for layer in table.rows] == sorted(hits.values())


async def test_pause_resume_and_reset_keys(embedded, controller):
    session = controller.session
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        wait = partial(until, pause=pilot.pause)
        await wait(lambda: app.snapshot and app.snapshot["tokens"] > 8)
        await pilot.press("p")
        await wait(lambda: session.state == "paused" and app.snapshot["state"] == "paused")
        await pilot.press("r")
        await wait(lambda: session.tokens == 0 and app.snapshot["tokens"] == 0)
        await pilot.press("p")
        await wait(lambda: session.state == "running" and app.snapshot["tokens"] > 0)


async def test_help_screen_and_command_palette(embedded, controller):
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)

        version = controller.version
        await run_command(pilot, "toggle prefetch_touch")
        await until(lambda: controller.version > version, pause=pilot.pause)
        assert controller.settings.prefetch_touch is True
        assert isinstance(app.screen, KnobsScreen)  # where a rejection would show

        await run_command(pilot, "apply preset 2q")
        await until(lambda: controller.settings.expert_cache == 0, pause=pilot.pause)


async def test_a_repaint_while_the_app_closes_is_skipped(embedded):
    """At exit the screens lose their widgets while the repaint timer still runs."""
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await app.screen.query_one(StatusLine).remove()
        app.repaint(force=True)  # raised NoMatches once
        await app.screen.query_one(Readout).remove()
        app.repaint(force=True)


async def test_repaints_at_its_own_rate_from_the_newest_snapshot(embedded):
    """The engine makes hundreds of tokens a second; the UI takes a snapshot per repaint."""
    taken = []
    newest = embedded.latest
    embedded.latest = lambda: taken.append(1) or newest()
    app = create_app(embedded, refresh_hz=4)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        start, t0 = len(taken), time.monotonic()
        await pilot.pause(1.5)
        calls, elapsed = len(taken) - start, time.monotonic() - t0
    # a UI that painted every snapshot would take hundreds; the slack covers a timer tick
    # that lands on either edge of the measured span and the paint of the first screen
    assert 0 < calls <= 4 * elapsed + 3


async def test_the_remote_app_shows_the_same_screens(remote, controller):
    layers = controller.session.ckpt.config.num_layers
    controller.session.pause()  # it still sends snapshots
    app = create_app(remote)
    async with app.run_test(size=SIZE) as pilot:
        wait = partial(until, pause=pilot.pause)
        await pilot.press("2")
        await pilot.pause()
        table = app.screen.query_one(LayerTable)
        await wait(lambda: table.row_count == layers)
        await pilot.press("3")
        await pilot.pause()
        version = controller.version
        await type_into(pilot, "#knob-moce_bonus", "0.5")
        await wait(lambda: controller.version == version + 1)
        assert controller.settings.moce_bonus == 0.5


async def test_an_unreachable_server_ends_the_app_with_a_message():
    with listening_socket() as sock:  # a port nobody listens on once it is closed
        port = sock.getsockname()[1]
    app = create_app(RemoteBackend(f"http://127.0.0.1:{port}"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
    assert isinstance(app.failed, Unreachable) and "is `tuner serve` running" in str(app.failed)


async def test_the_knob_form_never_traps_the_keyboard(embedded, controller):
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        wait = partial(until, pause=pilot.pause)
        await pilot.press("3")
        await pilot.pause()
        field = app.screen.query_one("#knob-moce_bonus", Input)
        version = controller.version

        # enter applies and leaves the field: the app's keys work again
        await type_into(pilot, "#knob-moce_bonus", "0.5")
        await wait(lambda: controller.version == version + 1)
        assert app.focused is not field
        await pilot.press("2")
        await wait(lambda: app.current_mode == "layers")
        await pilot.press("3")
        await wait(lambda: app.current_mode == "knobs")

        # escape leaves the field and puts back what the engine runs
        field.focus()
        await pilot.pause()
        await pilot.press(*"9.5", "escape")
        await wait(lambda: app.focused is not field)
        assert field.value == "0.5" and controller.version == version + 1

        # tab away: the typed value is applied, not dropped
        field.focus()
        await pilot.pause()
        await pilot.press(*"0.25", "tab")
        await wait(lambda: controller.version == version + 2)
        assert controller.settings.moce_bonus == 0.25


async def test_the_knob_form_opens_in_a_field_and_tab_goes_on_from_the_one_left(
        embedded, controller):
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        wait = partial(until, pause=pilot.pause)
        await pilot.press("3")
        await wait(lambda: isinstance(app.screen, KnobsScreen))
        fields = list(app.screen.query(KnobField))
        await wait(lambda: app.focused is fields[0].control)
        version = controller.version
        # digits typed on opening are a value, not the keys that switch screens
        await pilot.press(*"0.5", "enter")
        await wait(lambda: controller.version == version + 1)
        assert app.current_mode == "knobs" and controller.settings.moce_bonus == 0.5
        assert app.focused is not fields[0].control  # out of the field: keys work again
        await pilot.press("tab")
        await wait(lambda: app.focused is fields[1].control)  # the next field, not the first
        await pilot.press("escape", "shift+tab")
        await wait(lambda: app.focused is fields[0].control)


async def test_sigterm_ends_the_app_as_its_quit_key_does(embedded, controller):
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        # the app's own handler, or the signal would end this test process
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)
        os.kill(os.getpid(), signal.SIGTERM)
        await until(lambda: app.interrupted, pause=pilot.pause)
    assert not app.is_running


async def test_switches_say_on_or_off_in_words(embedded, controller):
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await pilot.pause()
        state = app.screen.query_one("#field-prefetch_touch .switch-state", Label)
        assert str(state.render()) == "off"
        await pilot.click("#knob-prefetch_touch")
        await until(lambda: controller.settings.prefetch_touch, pause=pilot.pause)
        assert str(state.render()) == "on"


@pytest.mark.parametrize("query, mode", [("layers", "layers"), ("overview", "overview"),
                                         ("experts", "experts")])
async def test_the_palette_finds_the_screens(embedded, controller, query, mode):
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await pilot.pause()
        await run_command(pilot, query)
        await until(lambda: app.current_mode == mode, pause=pilot.pause)


@pytest.mark.slow  # typed into the palette with the engine decoding
async def test_the_palette_finds_pause_and_help(embedded, controller):
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        for query, done in (("pause", lambda: controller.session.state == "paused"),
                            ("help", lambda: isinstance(app.screen, HelpScreen))):
            await run_command(pilot, query)
            await until(done, pause=pilot.pause)


async def test_the_preset_diff_follows_apply_and_save(embedded, controller):
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        wait = partial(until, pause=pilot.pause)
        await pilot.press("4")
        await pilot.pause()
        presets = app.screen.query_one("#preset-list", DataTable)
        diff = app.screen.query_one("#preset-diff", DataTable)
        await wait(lambda: presets.row_count > 0)
        # values as the knob form shows them, never Python's reprs
        assert presets.get_row("2q")[2] == "cache_policy=2q"
        presets.move_cursor(row=presets.get_row_index("2q"))
        await pilot.press("d")
        await wait(lambda: diff.row_count > 0)  # cache_policy and the arena would change
        assert diff.get_row_at(0)[2:] == ["2q", "lru"]  # the preset, the settings now
        await pilot.press("a")
        await wait(lambda: controller.settings.cache_policy == "2q")
        await wait(lambda: diff.row_count == 0)  # applied: nothing left to change

        controller.change({"moce_bonus": 1.5})
        await pilot.press("s")
        await wait(lambda: isinstance(app.screen, SavePresetScreen)
                   and app.focused is app.screen.query_one("#preset-name", Input))
        await fill_save_dialog(pilot, "tuned")
        await wait(lambda: app.screen.selected == "tuned")
        title = app.screen.query_one("#diff-title", Static)
        await wait(lambda: "tuned matches the current settings" in str(title.render()))


async def test_saving_over_a_preset_asks_first(embedded, controller):
    controller.session.pause()
    controller.save_preset("mine", "kept")
    controller.change({"moce_bonus": 2.0})
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        wait = partial(until, pause=pilot.pause)
        await pilot.press("4")
        await pilot.pause()
        await pilot.press("s")
        await wait(lambda: isinstance(app.screen, SavePresetScreen)
                   and app.focused is app.screen.query_one("#preset-name", Input))
        await fill_save_dialog(pilot, "mine")
        await wait(lambda: isinstance(app.screen, Confirm))
        assert "moce_bonus" not in controller.store.get("mine").knobs  # not yet
        await pilot.click("#yes")
        await wait(lambda: controller.store.get("mine").knobs.get("moce_bonus") == 2.0)
        assert controller.store.get("mine").meta["description"] == "kept"


async def test_a_lost_server_is_not_shown_as_running(controller):
    server = serve_in_thread(create_web_app(controller))
    app = create_app(RemoteBackend(server.__enter__(), rate=20))
    async with app.run_test(size=SIZE) as pilot:
        status = app.screen.query_one(StatusLine)
        await until(lambda: "● running" in str(status.render()), pause=pilot.pause)
        await asyncio.to_thread(server.__exit__, None, None, None)  # the server stops
        await until(lambda: "disconnected" in str(status.render()), pause=pilot.pause,
                    timeout=30)
        assert "● running" not in str(status.render())
        assert "last seen running" in str(status.render())


async def test_the_layer_column_stays_when_the_table_scrolls_sideways(embedded, controller):
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=(60, 30)) as pilot:
        await pilot.press("2", *["c"] * len(COLUMN_SETS[1:]))  # the last set: all columns
        table = app.screen.query_one(LayerTable)
        await until(lambda: table.column_set == "all" and table.row_count, pause=pilot.pause)
        table.focus()
        for _ in range(12):
            await pilot.press("right")
        await pilot.pause()
        assert table.scroll_offset.x > 0
        header = "".join(s.text for s in table.render_line(0))
        assert header.lstrip().startswith("layer")
        row = "".join(s.text for s in table.render_line(1))
        assert row[: table._edges[1]].strip() == "0"


async def test_log_lines_become_notifications_not_text_on_the_screen(embedded, capsys):
    import logging

    app = create_app(embedded)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        logging.getLogger("httpx").info("HTTP Request: GET /api/settings")
        logging.getLogger("tuner.engine.session.session").error("settings version 9 rejected")
        await until(lambda: any("version 9 rejected" in n.message
                                for n in app._notifications), pause=pilot.pause)
        assert not any("HTTP Request" in n.message for n in app._notifications)
    out, err = capsys.readouterr()
    assert "HTTP Request" not in out + err
async def test_the_palette_applies_budgets_from_the_window(embedded, controller):
    await until(lambda: controller.session.tokens >= 8)
    controller.session.pause()  # the window keeps its routings; the palette gets the cores
    version = controller.version
    app = create_app(embedded)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await run_command(pilot, "apply per-layer budgets from the window (hits)")
        await until(lambda: controller.version > version, pause=pilot.pause)
        assert controller.settings.arena_split == "layers"
        await until(lambda: any("with these quotas" in n.message for n in app._notifications),
                    pause=pilot.pause)
