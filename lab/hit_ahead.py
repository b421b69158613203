"""The hit path against the fully resident one with 1, 2 and 3 layers queued ahead of the
host (device_first.QUEUE_AHEAD), and the host's own time per layer: settling a layer
(DeviceFirst._settle), launching one (DeviceFirst._launch) and the replays (DeviceStep.run,
the resident path's too), on one model, every lookup a hit, interleaved rounds. GPU call 24
ran it at commit ecb6a72, where it also timed the hit path with the layers' timing pairs
off (layers have one event of their own since).

    python3 lab/hit_ahead.py MODEL_FOLDER
"""

import statistics
import sys
import time

import torch

from lab.timed import timed
from tuner.bench.machinery import every_hit
from tuner.engine.step import device_first
from tuner.engine.step.device_step import DeviceStep
from tuner.knobs import Config

TOKENS, ROUNDS = 64, 5
spent = {"_settle": 0.0, "_launch": 0.0, "run": 0.0}
timed(device_first.DeviceFirst, "_settle", spent)
timed(device_first.DeviceFirst, "_launch", spent)
timed(DeviceStep, "run", spent)

bench = every_hit(Config(model=sys.argv[1], device="cuda"), TOKENS)
mc, resident, seq = bench.ckpt.config, bench.resident, bench.seq
engine = bench.engine()


def ms(step) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for pos, t in enumerate(seq):
        step(t, pos)
    torch.cuda.synchronize()
    return 1000 * (time.perf_counter() - t0) / len(seq)


ms(engine.step)
ms(resident.step)
for ahead in (1, 2, 3):
    device_first.QUEUE_AHEAD = ahead
    ms(engine.step)
    ratios, host = [], []
    for _ in range(ROUNDS):
        for k in spent:
            spent[k] = 0.0
        a = ms(engine.step)
        ratios.append(a / ms(resident.step))
        per_layer = 1e6 / (len(seq) * mc.num_layers)
        host.append((a, spent["_settle"] * per_layer,
                     spent["_launch"] * per_layer, spent["run"] * per_layer))
    a, settle, launch, replay = (statistics.median(x) for x in zip(*host))
    print(f"ahead {ahead}: engine {a:.3f} ms/token, / resident {statistics.median(ratios):.3f}; "
          f"host per layer: settle {settle:.1f} us, launch {launch:.1f} us, replay {replay:.1f} us")
engine.close()
