"""Scratch: the throwaway `label` field reaches every surface."""
import asyncio, time
import httpx
import pytest
from tests.ui.conftest import following, until
from tuner.cli import build_parser
from tuner.control.models import ABRequest
from tuner.ui.app import create_app
from tuner.ui.screens.ab_dialog import ABDialog

def test_rest_form_cli(live):
    r = httpx.post(f"{live.url}/api/ab", json={"a": "baseline", "b": "2q", "pairs": 1, "tokens": 8, "label": "mine"})
    assert r.status_code == 202 and r.json()["label"] == "mine", r.text
    deadline = time.monotonic() + 120
    while (job := httpx.get(f"{live.url}/api/ab").json())["state"] == "running":
        assert time.monotonic() < deadline; time.sleep(0.2)
    assert job["result"]["label"] == "mine" and job["label"] == "mine"
    html = httpx.get(f"{live.url}/ui/ab").text
    assert "<p>mine: " in html
    assert 'name="label"' in httpx.get(f"{live.url}/").text
    args = build_parser(["ab"]).parse_args(["ab", "x", "y", "--label", "cli"])
    assert args.label == "cli"
