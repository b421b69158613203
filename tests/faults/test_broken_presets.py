"""Presets under faults: broken files of every kind, folders that take no writes, races
on one name, names with a trailing newline, temporary files left by a killed writer."""

from __future__ import annotations

import errno
import os
import threading
import time
from urllib.parse import quote

import httpx
import pytest

from tuner.cli import main as cli
from tuner.presets import STALE_TEMP_S, PresetError, Store, check_name

BROKEN = {
    "deep": "[knobs]\nmoce_bonus = " + "[" * 3000 + "]" * 3000 + "\n",
    "digits": "[knobs]\nseed = " + "7" * 5001 + "\n",
    "binary": b"\xff\xfe\x00[knobs]",
    "huge": "# " + "x" * 70_000 + "\n[knobs]\n",
    "table": "knobs = 3\n",
    "value": "[knobs]\nmoce_bonus = " + "9" * 4000 + ".0\n",
}


@pytest.fixture
def broken(tuner_home):
    folder = tuner_home / "presets"
    folder.mkdir(parents=True)
    for name, text in BROKEN.items():
        path = folder / f"{name}.toml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return folder


def test_every_broken_file_is_listed_with_its_reason(live, broken, capsys):
    r = httpx.get(f"{live.url}/api/presets")
    assert r.status_code == 200
    listed = {p["name"]: p for p in r.json()}
    for name in BROKEN:
        error = listed[name]["error"]
        assert error and f"{name}.toml" in error, (name, error)
        assert len(error) < 300, error  # a reason, not the file echoed back
    assert "nested too deeply" in listed["deep"]["error"]
    assert "limit" in listed["huge"]["error"]
    assert listed["2q"]["error"] is None  # the good ones are still there

    assert httpx.get(f"{live.url}/").status_code == 200  # the dashboard lists them too
    for name in BROKEN:
        r = httpx.get(f"{live.url}/api/presets/{name}")
        assert r.status_code == 422 and f"{name}.toml" in r.json()["detail"]

    assert cli(["presets", "list"]) == 0
    out = capsys.readouterr().out
    assert all(f"{name} " in out for name in BROKEN) and out.count("broken") >= len(BROKEN)


def test_a_folder_that_takes_no_writes_answers_403(live, tuner_home):
    tuner_home.mkdir(parents=True, exist_ok=True)
    (tuner_home / "presets").write_text("a file where the presets folder should be")
    r = httpx.post(f"{live.url}/api/presets/mine", json={"description": ""})
    assert r.status_code == 403, r.text
    assert "mine.toml" in r.json()["detail"] and "not writable" in r.json()["detail"]
    page = httpx.post(f"{live.url}/ui/presets", data={"name": "mine"},
                      headers=live.page_headers)
    assert page.status_code == 200 and "not writable" in page.text


def test_a_full_folder_answers_507(live, monkeypatch):
    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("tuner.presets.store.os.fsync", no_space)
    r = httpx.post(f"{live.url}/api/presets/mine", json={"description": ""})
    assert r.status_code == 507, r.text
    assert "no space left" in r.json()["detail"]
    assert not list((Store().user).glob("*"))  # no half-written file, no temporary one


def test_save_and_delete_of_one_name_never_collide(live):
    """Writers and deleters of one name at once: each answer is one the API documents for
    that call (never a 500, a 403 meant for shipped presets or a 422 meant for broken
    files), and a read sees the preset whole or not at all."""
    url = f"{live.url}/api/presets/race"
    seen: dict[str, set[int]] = {"POST": set(), "DELETE": set(), "GET": set()}

    def hammer(method: str) -> None:
        with httpx.Client(timeout=60) as client:
            for _ in range(30):  # a count, not a time: a loaded machine answers fewer
                r = client.request(method, url, json={"description": "x", "overwrite": True}
                                   if method == "POST" else None)
                seen[method].add(r.status_code)

    threads = [threading.Thread(target=hammer, args=(m,)) for m in seen for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["POST"] == {201}
    assert seen["DELETE"] <= {204, 404} and seen["GET"] <= {200, 404}
    assert 204 in seen["DELETE"]


@pytest.mark.parametrize("name", ["nlx\n", "nlx\r\n", "nlx\x00", " nlx", "nlx "])
def test_names_are_matched_in_full(live, tuner_home, name):
    with pytest.raises(PresetError):
        check_name(name)
    r = httpx.post(f"{live.url}/api/presets/{quote(name)}", json={"description": ""})
    assert r.status_code == 400, r.text
    assert not (tuner_home / "presets").exists() or not list((tuner_home / "presets").iterdir())


def test_stale_temporary_files_are_cleaned_and_fresh_ones_kept(tuner_home):
    folder = tuner_home / "presets"
    folder.mkdir(parents=True)
    stale, fresh = folder / ".mine.k1ll3d.tmp", folder / ".mine.wr1t1ng.tmp"
    for path in (stale, fresh):
        path.write_text("[preset]\n")
    old = time.time() - STALE_TEMP_S - 10
    os.utime(stale, (old, old))
    assert Store().clean() == [stale]
    assert not stale.exists() and fresh.exists()
