"""Scratch: the throwaway A/B `caption` field reaches the REST body, the job's JSON, the
result, the page's form and status, and `tuner ab`'s flags."""
import time

import httpx

from tuner.cli import build_parser


def test_rest_page_cli(live):
    r = httpx.post(f"{live.url}/api/ab", json={"a": "baseline", "b": "2q", "pairs": 1,
                                               "tokens": 8, "caption": "mine"})
    assert r.status_code == 202 and r.json()["caption"] == "mine", r.text
    deadline = time.monotonic() + 120
    while (job := httpx.get(f"{live.url}/api/ab").json())["state"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert job["state"] == "done" and job["result"]["caption"] == "mine" and job["caption"] == "mine"
    assert '<p class="ab-state state-done">mine: baseline (A)' in \
        httpx.get(f"{live.url}/ui/ab").text
    assert 'name="caption"' in httpx.get(f"{live.url}/").text
    schema = httpx.get(f"{live.url}/openapi.json").json()["components"]["schemas"]
    assert "caption" in schema["ABRequest"]["properties"]
    args = build_parser(["ab"]).parse_args(["ab", "x", "y", "--caption", "cli"])
    assert args.caption == "cli"
