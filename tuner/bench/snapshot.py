"""What one snapshot costs against one token: the engine's telemetry priced in tokens."""

from __future__ import annotations

import statistics
import time

from tuner.bench.limits import ratio
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.session.session import Session

TAKEN = 20  # snapshots timed after the tokens


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    session = Session(cfg)
    try:
        session.run(tokens)
        ms = []
        for _ in range(TAKEN):
            t0 = time.perf_counter()
            snap = session.snapshot()
            ms.append(1000 * (time.perf_counter() - t0))
    finally:
        session.engine.close()
    per_token = snap["totals"]["ms_per_token"]
    snapshot_ms = round(statistics.median(ms), 3)
    return {"tokens": tokens, "snapshot_ms": snapshot_ms, "ms_per_token": per_token,
            "tokens_per_snapshot": ratio(snapshot_ms, per_token), "taken": TAKEN}


def text(r: dict) -> str:
    return (f"snapshot: one snapshot {r['snapshot_ms']} ms against {r['ms_per_token']} "
            f"ms/token = {r['tokens_per_snapshot']} tokens (median of {r['taken']}, after "
            f"{r['tokens']} tokens)")
