"""Interleaved A/B of whole settings on one GPU machine: a session per setting, each warmed,
then rounds of a few tokens each in turn, so a slow spell of a shared machine lands on
every side. Prints each setting's median ms/token and stall, and its paired ratio to the
first setting.

    python3 lab/ab_sessions.py "expert_store=disk" "expert_store=disk,miss_direct=0" ...
"""

import statistics
import sys
import time
from dataclasses import replace

from tuner.bench.gpu_suite import knob_values
from tuner.engine.session.session import Session
from tuner.knobs import Config

ROUNDS, TOKENS, WARM = 9, 16, 32
settings = sys.argv[1:]
sessions = [Session(replace(Config(), **knob_values(s))) for s in settings]
for s in sessions:
    s.run(WARM)
ms: list[list[float]] = [[] for _ in sessions]
stall: list[list[float]] = [[] for _ in sessions]
for _ in range(ROUNDS):
    for i, s in enumerate(sessions):
        s.reset_counters()
        t0 = time.perf_counter()
        s.run(TOKENS)
        ms[i].append(1000 * (time.perf_counter() - t0) / TOKENS)
        stall[i].append(s.snapshot()["totals"]["stall_ms"] / TOKENS)
for i, name in enumerate(settings):
    paired = statistics.median(a / b for a, b in zip(ms[i], ms[0]))
    print(f"{name}: {statistics.median(ms[i]):.2f} ms/token (runs "
          f"{' '.join(f'{x:.1f}' for x in ms[i])}), stall {statistics.median(stall[i]):.2f}, "
          f"paired / first {paired:.3f}")
for s in sessions:
    s.engine.close()
