"""Presets over REST and from the shell: round trips, broken files, hostile names."""

from __future__ import annotations

import signal
import subprocess
import sys

import httpx
import pytest

from tuner.cli import main as cli
from tuner.presets import Store


def test_round_trip_gives_back_exactly_the_same_settings(live):
    api = f"{live.url}/api/presets"
    tuned = {"moce_bonus": 0.85, "prefetch": "stale", "cache_policy": "2q", "prefetch_max": 5}
    httpx.patch(f"{live.url}/api/settings", json=tuned).raise_for_status()
    saved_settings = live.controller.settings
    r = httpx.post(f"{api}/mine", json={"description": "round trip"})
    assert r.status_code == 201, r.text
    assert r.json()["meta"]["description"] == "round trip"
    assert httpx.get(f"{api}/mine/diff").json() == []  # against the current settings

    httpx.post(f"{api}/baseline/apply").raise_for_status()
    assert live.controller.settings != saved_settings
    # applying keeps the session's model, so the model is no difference to report
    assert [r["knob"] for r in httpx.get(f"{api}/2q/diff").json()] == ["cache_policy"]
    rows = httpx.get(f"{api}/mine/diff", params={"against": "baseline"}).json()
    assert {r["knob"]: (r["a"], r["b"]) for r in rows if r["knob"] in tuned} == {
        "moce_bonus": (0.85, 0.0), "prefetch": ("stale", "off"), "cache_policy": ("2q", "lru"),
        "prefetch_max": (5, 2)}

    applied = httpx.post(f"{api}/mine/apply").json()
    assert applied["settings"] == saved_settings.model_dump(mode="json")
    assert live.controller.settings == saved_settings
    assert live.session.applied_version == applied["version"]
    assert Store().get("mine").settings() == saved_settings

    assert "mine" in [p["name"] for p in httpx.get(api).json()]
    assert httpx.delete(f"{api}/mine").status_code == 204
    assert httpx.get(f"{api}/mine").status_code == 404


def test_shipped_presets_are_listed_and_read_only(live):
    presets = {p["name"]: p for p in httpx.get(f"{live.url}/api/presets").json()}
    assert {"baseline", "seed000-route", "2q", "stale-prefetch"} <= set(presets)
    assert presets["2q"]["shipped"] and presets["2q"]["knobs"] == {"cache_policy": "2q"}
    r = httpx.delete(f"{live.url}/api/presets/2q")
    assert r.status_code == 403 and "shipped" in r.json()["detail"]
    applied = httpx.post(f"{live.url}/api/presets/2q/apply").json()
    assert applied["settings"]["cache_policy"] == "2q"


def test_corrupt_preset_is_reported_with_file_and_line_never_fatal(live, tuner_home):
    folder = tuner_home / "presets"
    folder.mkdir(parents=True)
    (folder / "broken.toml").write_text('[preset]\nname = "broken"\n[knobs]\nmoce_bonus = \n')
    (folder / "unknown.toml").write_text('[preset]\nname = "unknown"\n\n[knobs]\nwarp = 9\n')
    (folder / "range.toml").write_text('[knobs]\nprefetch = "stale"\nmoce_protect = 99\n')
    listed = {p["name"]: p for p in httpx.get(f"{live.url}/api/presets").json()}
    assert "broken.toml:4" in listed["broken"]["error"]
    assert "unknown.toml:5" in listed["unknown"]["error"] and "warp" in listed["unknown"]["error"]
    assert "range.toml:3" in listed["range"]["error"] and "[0, 64]" in listed["range"]["error"]
    before = live.controller.state()
    for name in ("broken", "unknown", "range"):
        for method, path in (("GET", ""), ("POST", "/apply"), ("GET", "/diff")):
            r = httpx.request(method, f"{live.url}/api/presets/{name}{path}")
            assert r.status_code == 422, (name, path, r.text)
            assert f"{name}.toml:" in r.json()["detail"]
    assert live.controller.state() == before
    live.wait_tokens(2)
    assert httpx.get(f"{live.url}/api/presets/2q").status_code == 200


@pytest.mark.parametrize("name", ["..", "../../etc/passwd", "a/b", ".hidden", "x" * 65,
                                  "a..b", "with space", "%2e%2e%2fescape"])
def test_names_cannot_leave_the_presets_folder(live, tuner_home, name):
    for method, path in (("GET", ""), ("POST", ""), ("POST", "/apply"), ("DELETE", ""),
                         ("GET", "/diff")):
        url = f"{live.url}/api/presets/{name}{path}"
        r = httpx.request(method, url, json={"description": ""} if method == "POST" else None)
        assert r.status_code in (400, 404, 405), (method, url, r.status_code)
        if r.status_code == 400:
            assert "preset name" in r.json()["detail"]
    r = httpx.get(f"{live.url}/api/presets/2q/diff", params={"against": name})
    assert r.status_code == 400
    assert not list(tuner_home.parent.rglob("*.toml"))  # nothing written anywhere


def test_presets_cli_offline(tuner_home, capsys):
    assert cli(["presets", "save", "fast", "--preset", "2q", "--moce-bonus", "0.5",
                "--description", "from flags"]) == 0
    saved = Store().get("fast")
    assert saved.knobs == {"cache_policy": "2q", "moce_bonus": 0.5}
    assert saved.meta["based_on"] == "2q" and saved.meta["description"] == "from flags"
    capsys.readouterr()
    assert cli(["presets", "list"]) == 0
    listing = capsys.readouterr().out
    assert "fast" in listing and "user" in listing and "baseline" in listing
    assert cli(["presets", "diff", "fast", "2q"]) == 0
    diff = capsys.readouterr().out
    assert "moce_bonus" in diff and "cache_policy" not in diff
    assert cli(["presets", "show", "fast"]) == 0
    assert '"moce_bonus": 0.5' in capsys.readouterr().out
    assert cli(["presets", "show", "../x"]) == 2
    assert "preset name" in capsys.readouterr().err
    assert cli(["presets", "save", "bad", "--moce-bonus", "99"]) == 2
    assert "[0, 10]" in capsys.readouterr().err


def test_presets_cli_apply_against_a_server(live, capsys):
    assert cli(["presets", "apply", "2q", "--url", live.url]) == 0
    assert "settings version 2" in capsys.readouterr().out
    assert live.controller.settings.cache_policy == "2q"
    assert cli(["presets", "apply", "nope", "--url", live.url]) == 2
    assert "nope: no preset of that name; known:" in capsys.readouterr().err


def test_presets_cli_apply_prints_no_request_log(live):
    """httpx logs each request at INFO, which the command line's logging would print."""
    out = subprocess.run([sys.executable, "-m", "tuner", "presets", "apply", "2q", "--url",
                          live.url], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0 and out.stdout.startswith("applied 2q: settings version ")
    assert out.stderr == ""


def test_serve_refuses_other_hosts_without_a_token():
    out = subprocess.run([sys.executable, "-m", "tuner.cli", "serve", "--host", "0.0.0.0"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert "--token" in out.stderr and "0.0.0.0" in out.stderr


def test_serve_runs_the_engine_behind_the_api(tiny_overrides):
    from tuner.web.local import listening_socket

    with listening_socket() as sock:
        port = sock.getsockname()[1]
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in tiny_overrides.items()]
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "serve", "--port", str(port),
                             "--preset", "2q", *flags], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert f"at http://127.0.0.1:{port}/" in line, line
        state = httpx.get(f"http://127.0.0.1:{port}/api/settings", timeout=30).json()
        assert state["settings"]["cache_policy"] == "2q" and state["state"] == "running"
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: uvicorn shuts down, then the session
        assert proc.wait(timeout=30) == 130


def test_saving_never_replaces_a_shipped_preset_and_asks_before_a_user_one(live):
    api = f"{live.url}/api/presets"
    shipped = Store().get("baseline")
    r = httpx.post(f"{api}/baseline", json={"description": "mine now", "overwrite": True})
    assert r.status_code == 403 and "shipped" in r.json()["detail"]
    assert Store().get("baseline").meta == shipped.meta  # the A/B baseline is untouched

    assert httpx.post(f"{api}/mine", json={"description": "first"}).status_code == 201
    httpx.patch(f"{live.url}/api/settings", json={"moce_bonus": 0.5}).raise_for_status()
    r = httpx.post(f"{api}/mine", json={})
    assert r.status_code == 409 and "overwrite" in r.json()["detail"]
    assert "moce_bonus" not in Store().get("mine").knobs
    r = httpx.post(f"{api}/mine", json={"overwrite": True})
    assert r.status_code == 201
    assert r.json()["knobs"]["moce_bonus"] == 0.5 and r.json()["meta"]["description"] == "first"
    r = httpx.post(f"{api}/mine", json={"overwrite": True, "description": "second"})
    assert r.json()["meta"]["description"] == "second"


def test_the_page_asks_before_it_replaces_a_preset(live):
    def post(**data: str) -> str:
        return httpx.post(f"{live.url}/ui/presets", headers=live.page_headers, data=data).text

    assert "saved the current settings as mine" in post(name="mine", description="kept")
    httpx.patch(f"{live.url}/api/settings", json={"moce_bonus": 0.5}).raise_for_status()
    asked = post(name="mine", description="")
    assert "a user preset named mine exists" in asked
    assert 'name="overwrite" value="1"' in asked and "overwrite mine</button>" in asked
    assert "moce_bonus" not in Store().get("mine").knobs
    done = post(name="mine", description="", overwrite="1")
    assert "saved the current settings as mine" in done
    assert Store().get("mine").knobs["moce_bonus"] == 0.5
    assert Store().get("mine").meta["description"] == "kept"
    assert "shipped presets cannot be replaced" in post(name="2q", overwrite="1")


def test_presets_cli_asks_for_overwrite(tuner_home, capsys):
    assert cli(["presets", "save", "fast", "--description", "first"]) == 0
    assert cli(["presets", "save", "fast", "--moce-bonus", "0.5"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert cli(["presets", "save", "fast", "--moce-bonus", "0.5", "--overwrite"]) == 0
    assert Store().get("fast").meta["description"] == "first"
    assert cli(["presets", "save", "2q", "--overwrite"]) == 2
    assert "shipped" in capsys.readouterr().err
