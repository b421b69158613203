"""The machinery ratio's parts on the CPU: each layer's own work (DeviceStep.run: attention,
router, table lookup, experts) and the logits (DeviceStep.logits) timed apart from the
host's bookkeeping after each layer, against the fully resident model on the same greedy
tokens, three rounds. Run from the
repository root: PYTHONPATH=. python lab/machinery_split.py"""

import torch

from lab.timed import timed
from tuner.bench.limits import time_steps
from tuner.bench.machinery import every_hit
from tuner.engine.step import device_step
from tuner.settings import load, to_config

TOKENS = 64

torch.set_num_threads(1)
# as the machinery section runs it: an arena that holds every expert, nothing speculative
bench = every_hit(to_config(load()), TOKENS)
resident, seq = bench.resident, bench.seq
engine = bench.engine()
spent = {"run": 0.0, "logits": 0.0}  # seconds in each timed DeviceStep method
timed(device_step.DeviceStep, "run", spent)
timed(device_step.DeviceStep, "logits", spent)

time_steps(engine.step, seq)  # warm: loads every expert the sequence routes to
for _ in range(3):
    spent.update(run=0.0, logits=0.0)
    arena = time_steps(engine.step, seq)
    body, head = (spent[k] / len(seq) * 1e3 for k in ("run", "logits"))
    print(f"arena {arena:.2f} ms/token (layers' own work {body:.2f}, logits {head:.2f}, "
          f"host {arena - body - head:.2f})  resident {time_steps(resident.step, seq):.2f}")
engine.close()
