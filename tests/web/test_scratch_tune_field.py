"""Scratch: the throwaway tune field `sampler_seed` reaches the REST body, the job's JSON,
the page's form and the sampler."""
import time

import httpx


def done(url: str) -> dict:
    deadline = time.monotonic() + 300
    while (job := httpx.get(f"{url}/api/tune").json())["state"] in ("running", "stopping"):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert job["state"] == "done", job
    return job


def test_rest_page_and_sampler(live):
    assert 'name="sampler_seed"' in httpx.get(f"{live.url}/").text
    r = httpx.post(f"{live.url}/api/tune", json={"trials": 3, "tokens": 8, "sampler_seed": 7})
    assert r.status_code == 202 and r.json()["sampler_seed"] == 7, r.text
    seven = [t["params"] for t in done(live.url)["rows"]]
    r = httpx.post(f"{live.url}/ui/tune", data={"trials": "3", "tokens": "8", "space": "",
                                                "fix": "", "objective": "ms",
                                                "sampler_seed": "8"},
                   headers=live.page_headers)
    assert r.status_code == 200, r.text
    job = done(live.url)
    assert job["sampler_seed"] == 8
    assert [t["params"] for t in job["rows"]] != seven  # the seed reached the sampler
