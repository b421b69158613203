"""Where a hit token's device time goes on the GPU machine: torch.profiler's kernel table of
the engine (an arena holding every expert, every lookup a hit) beside the fully resident
path, on one model, after a warm-up; per token: kernels launched, memcpys, and the device's
busy time.

    python3 lab/profile_device.py MODEL_FOLDER
"""

import sys
from dataclasses import replace

import torch
from torch.profiler import ProfilerActivity, profile

from tuner.engine.step.decode import Engine
from tuner.engine.step.reference import Resident
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config

TOKENS = 16
ckpt = Checkpoint(sys.argv[1])
mc = ckpt.config
device = torch.device("cuda")
cfg = replace(Config(), expert_cache=mc.num_layers * mc.num_experts, prefetch="off",
              moce_bonus=0.0, moce_bonus_r1=0.0)
engine = Engine(ckpt, cfg, device)
resident = Resident(ckpt, 256, device)
for name, step in (("engine", engine.step), ("resident", resident.step)):
    for pos in range(40):
        step(1, pos)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for pos in range(40, 40 + TOKENS):
            step(1, pos)
        torch.cuda.synchronize()
    device_ops = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    kernels = sum(e.count for e in device_ops)
    busy = sum(e.self_device_time_total for e in device_ops) / TOKENS / 1000
    print(f"\n{name}: device busy {busy:.3f} ms/token, {kernels / TOKENS:.1f} device ops/token")
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=22,
                                    max_name_column_width=60))
engine.close()
