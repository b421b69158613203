"""The machinery ratio's parts on the CPU: each layer's own work (DeviceStep.run: attention,
router, table lookup, experts) and the logits (DeviceStep.logits) timed apart from the
host's bookkeeping after each layer, against the fully resident model on the same greedy
tokens, three rounds. Run from the
repository root: PYTHONPATH=. python lab/machinery_split.py"""

import time
from dataclasses import replace

import torch

from tuner.engine.session.opening import model_folder, pick_device
from tuner.engine.step import device_step
from tuner.engine.step.decode import Engine
from tuner.engine.step.reference import Resident
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.settings import load, to_config

TOKENS = 64

torch.set_num_threads(1)
cfg = to_config(load())
ckpt = Checkpoint(model_folder(cfg))
mc, dev = ckpt.config, pick_device(cfg.device)
# as the machinery section runs it: an arena that holds every expert, nothing speculative
cfg = replace(cfg, expert_cache=mc.num_layers * mc.num_experts, prefetch="off",
              moce_bonus=0.0, moce_bonus_r1=0.0, cpu_pool=False)
resident = Resident(ckpt, cfg.context, dev)
seq, tok = [], 1
for pos in range(TOKENS):
    seq.append(tok)
    tok = int(torch.argmax(resident.step(tok, pos)))
engine = Engine(ckpt, cfg, dev)

spent = {"run": 0.0, "logits": 0.0}  # seconds in each timed DeviceStep method


def timed(name):
    inner = getattr(device_step.DeviceStep, name)

    def call(self, *args):
        start = time.perf_counter()
        out = inner(self, *args)
        spent[name] += time.perf_counter() - start
        return out

    setattr(device_step.DeviceStep, name, call)


timed("run")
timed("logits")


def ms_per_token(step) -> float:
    start = time.perf_counter()
    for pos, t in enumerate(seq):
        step(t, pos)
    return (time.perf_counter() - start) / len(seq) * 1e3


ms_per_token(engine.step)  # warm: loads every expert the sequence routes to
for _ in range(3):
    spent.update(run=0.0, logits=0.0)
    arena = ms_per_token(engine.step)
    body, head = (spent[k] / len(seq) * 1e3 for k in ("run", "logits"))
    print(f"arena {arena:.2f} ms/token (layers' own work {body:.2f}, logits {head:.2f}, "
          f"host {arena - body - head:.2f})  resident {ms_per_token(resident.step):.2f}")
engine.close()
