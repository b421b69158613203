"""Pictures of the main screens, compared with the accepted ones in __snapshots__/.

The engine is deterministic and paused, and decodes on the test's thread between
repaints, so every count is the same on each run. Its measured times are the one input
that is not: they are pinned to fixed values here before the UI sees them, and so is the
output hash, a hash of the logits' bits, which CPU kernels round differently from one
machine to another (the counters agreed on every machine tried). After an
intended change of the UI, or of the knob and counter tables the screens are generated
from, accept the new pictures with `pytest tests/ui --snapshot-update` (and look at them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ui.conftest import make_controller
from tuner.control.embedded import EmbeddedBackend
from tuner.presets import Store
from tuner.ui.app import create_app
from tuner.vocabulary.counters import COUNTERS

SIZE = (140, 44)
STEPS, TOKENS_PER_STEP = 8, 6  # sparkline points, and tokens decoded for each
CLOCKED = {c.name for c in COUNTERS if c.unit == "ms"}
PINNED = {"seconds": 1.0, "ms_per_token": 5.0, "tok_s": 200.0, "read_gbps": 0.5,
          "ttft_ms": 80.0}  # each where it is measured (not None)

PRESET = """\
[preset]
name = "2q"
description = "Two-hit protected LRU."

[knobs]
cache_policy = "2q"
"""


def pin_clocks(snap: dict[str, Any]) -> dict[str, Any]:
    for totals in (snap["totals"], snap["window"]["totals"], *snap["phases"].values(),
                   *snap["window"]["phases"].values()):
        totals.update({k: 1.0 for k in CLOCKED},
                      **{k: v for k, v in PINNED.items() if totals[k] is not None})
    for row in snap["layers"] + snap["window"]["layers"]:
        row.update({k: 1.0 for k in CLOCKED})
    snap["output_hash"] = "0123456789abcdef"
    return snap


class PinnedClocks(EmbeddedBackend):
    def latest(self) -> dict[str, Any] | None:
        return pin_clocks(super().latest())


@pytest.fixture
def still(tiny_overrides, tiny_model, tmp_path, monkeypatch) -> Iterator[EmbeddedBackend]:
    """A paused engine with a fixed preset folder (the shipped presets change over time),
    on the tiny model by a relative path, so no temporary folder's name is on screen."""
    (tmp_path / "shipped").mkdir()
    (tmp_path / "shipped" / "2q.toml").write_text(PRESET)
    (tmp_path / "tiny").symlink_to(tiny_model)
    monkeypatch.chdir(tmp_path)
    controller = make_controller({**tiny_overrides, "model": "tiny"},
                                 Store(user=tmp_path / "user", shipped=tmp_path / "shipped"))
    controller.session.pause()
    controller.session.start()
    yield PinnedClocks(controller)
    controller.session.stop()


def decoding(backend: EmbeddedBackend, then: tuple[str, ...] = ()):
    """Decodes a few tokens between repaints, so the sparklines have points, then presses
    `then` and leaves no focus, so no cursor blinks in the picture."""

    async def run_before(pilot) -> None:
        for _ in range(STEPS):
            backend.controller.session.run(TOKENS_PER_STEP)
            pilot.app.repaint()
        await pilot.press(*then)
        await pilot.pause()
        pilot.app.screen.set_focus(None)
        await pilot.pause()

    return run_before


def test_overview(snap_compare, still):
    assert snap_compare(create_app(still), terminal_size=SIZE, run_before=decoding(still))


def test_layers(snap_compare, still):
    assert snap_compare(create_app(still), terminal_size=SIZE,
                        run_before=decoding(still, ("2",)))


def test_knobs(snap_compare, still):
    assert snap_compare(create_app(still), terminal_size=SIZE,
                        run_before=decoding(still, ("3",)))


def test_presets(snap_compare, still):
    assert snap_compare(create_app(still), terminal_size=SIZE,
                        run_before=decoding(still, ("4", "d")))
