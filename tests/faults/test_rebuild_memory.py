"""A rebuild frees the replaced engine's arena at once, not when the cycle collector
happens to run: alternating the arena size leaves the process about as large as it began."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ALTERNATE = """
import json, sys
from dataclasses import replace
from tuner.engine.session.session import Session
from tuner.knobs import Config

def rss_mib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024

cfg = Config(model=sys.argv[1], expert_cache=128, io_workers=3, io_urgent=1)
session = Session(cfg)
session.start()
session.wait_tokens(5, 60)
first = rss_mib()
for _ in range(15):
    for slots in (26, 128):
        version = session.submit(replace(cfg, expert_cache=slots))
        assert session.wait_applied(version, 120) and session.rejection(version) is None
        session.wait_tokens(session.tokens + 2, 60)
last = rss_mib()
arena = session.snapshot()["arena"]["bytes"] / 2**20
session.stop(timeout=10)
print(json.dumps({"first": first, "last": last, "arena": arena}))
"""


def test_rss_returns_after_fifteen_alternations(wide_model):
    out = subprocess.run([sys.executable, "-c", ALTERNATE, str(wide_model)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    rss = json.loads(out.stdout.splitlines()[-1])
    print(f"\nRSS {rss['first']:.0f} MiB -> {rss['last']:.0f} MiB after 15 alternations of "
          f"a {rss['arena']:.0f} MiB arena")
    assert rss["last"] <= 1.10 * rss["first"]
