"""Settings read while they change: a version is always reported with its own settings."""

from __future__ import annotations

import threading

import httpx

from tests.conftest import PATIENT_S


def test_version_and_settings_are_read_together(live):
    """Polls GET /api/settings while changes are applied; every answer's settings must be
    the settings of the version it names."""
    by_version = {1: live.controller.state().settings}
    seen: list[dict] = []
    done = threading.Event()

    def poll() -> None:
        with httpx.Client(timeout=PATIENT_S) as client:
            while not done.is_set():
                seen.append(client.get(f"{live.url}/api/settings").json())

    pollers = [threading.Thread(target=poll) for _ in range(2)]
    for t in pollers:
        t.start()
    try:
        with httpx.Client(timeout=30) as client:
            for i in range(40):
                r = client.patch(f"{live.url}/api/settings", json={"moce_bonus": i / 10,
                                                                  "prefetch_touch": i % 2 == 1})
                state = r.json()
                by_version[state["version"]] = state["settings"]
    finally:
        done.set()
        for t in pollers:
            t.join()
    assert len(seen) > 40
    for state in seen:
        assert state["settings"] == by_version[state["version"]], state["version"]


def test_the_snapshot_names_the_version_of_its_settings(controller):
    """The same from the engine's side: every snapshot's settings are its version's."""
    by_version = {1: controller.state().settings}
    snaps: list[dict] = []
    done = threading.Event()

    def take() -> None:
        while not done.is_set():
            snaps.append(controller.session.snapshot())

    taker = threading.Thread(target=take)
    taker.start()
    try:
        for i in range(40):
            version = controller.change({"moce_bonus": i / 10}).version
            by_version[version] = controller.state().settings
    finally:
        done.set()
        taker.join()
    for snap in snaps:
        assert snap["settings"] == by_version[snap["settings_version"]]
