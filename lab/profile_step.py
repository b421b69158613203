"""Where a token's host time goes on the GPU machine: cProfile of the engine (every lookup a
hit) and of the fully resident path, on one model, after a warm-up.

    python3 lab/profile_step.py MODEL_FOLDER
"""

import cProfile
import pstats
import sys
import time

import torch

from tuner.engine.step.decode import Engine
from tuner.engine.step.reference import Resident
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config

ckpt = Checkpoint(sys.argv[1])
mc = ckpt.config
device = torch.device("cuda")
engine = Engine(ckpt, Config(expert_cache=mc.num_layers * mc.num_experts), device)
resident = Resident(ckpt, 256, device)
tokens = [1] * 40
for name, step in (("engine", engine.step), ("resident", resident.step)):
    for pos, tok in enumerate(tokens):
        step(tok, pos)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for pos, tok in enumerate(tokens):
        step(tok, pos)
    torch.cuda.synchronize()
    print(f"{name}: {1000 * (time.perf_counter() - t0) / len(tokens):.2f} ms/token")
    prof = cProfile.Profile()
    prof.enable()
    for pos, tok in enumerate(tokens[:16]):
        step(tok, pos)
    torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(18)
engine.close()
