"""What queueing four layers after a quiet token (device_first.QUEUE_AFTER_QUIET) does where
tokens both hit and miss: the disk store through KvikIO at arenas from 30 % of the model to
all of it, the same random tokens, rounds alternating the deep queue with one layer
(QUEUE_AHEAD), one engine per arena. Prints ms per token, the tokens queued deep and the
layer runs repeated a token.

    python3 lab/quiet_queue.py MODEL_FOLDER
"""

import statistics
import sys
from dataclasses import replace

import torch

from tuner.bench.limits import time_steps
from tuner.engine.step import device_first
from tuner.engine.step.decode import Engine
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config

TOKENS, ROUNDS = 128, 5
DEEP = device_first.QUEUE_AFTER_QUIET
counts = {"tokens": 0, "deep": 0, "again": 0}
plain = device_first.DeviceFirst.step


def step(self, token, pos):
    deep = self._quiet and device_first.QUEUE_AFTER_QUIET > device_first.QUEUE_AHEAD
    logits = plain(self, token, pos)
    counts["tokens"] += 1
    counts["deep"] += deep
    counts["again"] += self._runs - self.engine.mc.num_layers
    return logits


device_first.DeviceFirst.step = step
ckpt = Checkpoint(sys.argv[1])
mc = ckpt.config
device = torch.device("cuda")
pairs = mc.num_layers * mc.num_experts
# random ids, as llama-bench feeds: the demo's greedy text soon repeats itself, and its
# few experts then fit any arena
seq = torch.randint(mc.vocab_size, (TOKENS,), generator=torch.Generator().manual_seed(0)).tolist()
for share in (0.3, 0.5, 0.7, 0.9, 1.0):
    cfg = replace(Config(), expert_cache=int(share * pairs), io_reader="kvikio")
    engine = Engine(ckpt, cfg, device)
    time_steps(engine.step, seq)  # the arena takes the sequence's working set
    ms = {1: [], DEEP: []}
    seen = {1: dict.fromkeys(counts, 0), DEEP: dict.fromkeys(counts, 0)}
    for _ in range(ROUNDS):
        for depth in (device_first.QUEUE_AHEAD, DEEP):
            device_first.QUEUE_AFTER_QUIET = depth
            counts.update(dict.fromkeys(counts, 0))
            ms[depth].append(time_steps(engine.step, seq))
            for k in counts:
                seen[depth][k] += counts[k]
    engine.close()
    line = [f"arena {share:.0%}:"]
    for depth in ms:
        c = seen[depth]
        line.append(f"queue {depth} after quiet {statistics.median(ms[depth]):.3f} ms/token "
                    f"({c['deep'] / c['tokens']:.0%} deep, {c['again'] / c['tokens']:.2f} "
                    "runs again a token);")
    line.append(f"deep / one {statistics.median(a / b for a, b in zip(ms[DEEP], ms[1])):.3f}")
    print(" ".join(line), flush=True)
