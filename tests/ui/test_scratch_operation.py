"""Scratch: the throwaway `notes` operation, answered alike by both backends (the remote one
through the route GET /api/notes)."""
import pytest

from tests.ui.conftest import following

pytestmark = pytest.mark.anyio


async def test_both_backends_and_the_route_answer_it(remote, embedded, controller):
    controller.change({"moce_bonus": 1.0, "prefetch": "stale"})  # a setting with notes
    controller.session.pause()
    expected = controller.snapshot()["notes"]
    assert expected
    for backend in (remote, embedded):
        async with following(backend):
            assert await backend.notes() == expected
