"""Fixtures of the web tests: the tiny model's session, and a real server around it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.web.live import Live, serve, start_controller
from tuner.control.controller import Controller


@pytest.fixture
def controller(tiny_overrides) -> Iterator[Controller]:
    controller = start_controller(tiny_overrides)
    yield controller
    controller.close()


@pytest.fixture
def live(controller) -> Iterator[Live]:
    yield from serve(controller)

