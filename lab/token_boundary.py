"""Where the hit path's time beyond the resident model's goes: inside a token (from the
token's first event to its last layer's) or at the boundary between tokens, where the host
finishes one token and starts the next while the device may wait. Every lookup a hit, on
one model, interleaved rounds; the fully resident model timed both as the machinery section
times it (tokens queued back to back, no host sync) and as a decode loop that reads each
token's logits before the next (one sync a token). The host's end-of-token work
(Engine.step after the layers: logits, probe, clock) is timed apart.

    python3 lab/token_boundary.py MODEL_FOLDER
"""

import statistics
import sys
import time

import torch

from lab.timed import timed
from tuner.bench.machinery import every_hit
from tuner.engine.step import clock, decode, device_first, probe
from tuner.knobs import Config

TOKENS, ROUNDS = 64, 5
spent: dict[str, float] = {}
timed(device_first.DeviceFirst, "step", spent)
timed(probe.Probe, "score", spent)
timed(clock.CudaClock, "flush", spent)
timed(decode.Engine, "check_residency", spent)

bench = every_hit(Config(model=sys.argv[1], device="cuda"), TOKENS)
resident, seq = bench.resident, bench.seq
engine = bench.engine()
inside: list[float] = []  # ms a token from its first event to its last layer's


def engine_step(t, pos):
    out = engine.step(t, pos)
    run = engine.device_step
    run.done[-1].synchronize()  # a fix of the last layer records its event again
    inside.append(run._begin.elapsed_time(run.done[-1]))
    return out


def ms(step, synced: bool) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for pos, t in enumerate(seq):
        out = step(t, pos)
        if synced:
            out.cpu()
    torch.cuda.synchronize()
    return 1000 * (time.perf_counter() - t0) / len(seq)


for _ in range(2):
    ms(engine_step, False)
    ms(resident.step, False)
rows = []
for _ in range(ROUNDS):
    spent.clear()
    inside.clear()
    a = ms(engine_step, False)
    host = {k: 1000 * v / len(seq) for k, v in spent.items()}
    rows.append((a, statistics.mean(inside), ms(resident.step, False),
                 ms(resident.step, True), host))
for a, ins, r, rs, host in rows:
    print(f"engine {a:.3f} ms/token (inside a token {ins:.3f}, boundary {a - ins:.3f}); "
          f"resident queued {r:.3f}, synced {rs:.3f}; engine / resident {a / r:.3f}, "
          f"/ synced {a / rs:.3f}; host ms/token: "
          + ", ".join(f"{k} {v:.3f}" for k, v in host.items()))
med = [statistics.median(x) for x in zip(*(row[:4] for row in rows))]
print(f"medians: engine {med[0]:.3f}, inside {med[1]:.3f}, boundary {med[0] - med[1]:.3f}, "
      f"resident queued {med[2]:.3f}, synced {med[3]:.3f}")
engine.close()
