"""Where a token goes when misses stream, on the GPU machine: the OLMoE shape (16 layers,
bf16) at the default 20 % arena with the RAM store, 32 tokens warm, then cProfile of 32
tokens: which host calls wait (event synchronize: the device is behind) and which work.

    python3 lab/profile_miss.py [KNOB=VALUE ...]
"""

import cProfile
import pstats
import sys
import time
from dataclasses import replace

from tuner.bench.gpu_suite import knob_values
from tuner.engine.session.session import Session
from tuner.engine.weights import synth
from tuner.knobs import Config

cfg = replace(Config(model=str(synth.ensure(synth.shape("olmoe"))), expert_store="ram"),
              **knob_values(",".join(sys.argv[1:])))
s = Session(cfg)
s.run(32)
s.reset_counters()
t0 = time.perf_counter()
s.run(32)
wall = 1000 * (time.perf_counter() - t0) / 32
t = s.snapshot()["totals"]
print(f"wall {wall:.2f} ms/token, engine {t['ms_per_token']} ms/token, misses/token "
      f"{t['sync_misses'] / t['tokens']:.2f}, layer_ms/token {t['layer_ms'] / t['tokens']:.2f}, "
      f"stall_ms/token {t['stall_ms'] / t['tokens']:.2f}")
prof = cProfile.Profile()
prof.enable()
s.run(32)
prof.disable()
pstats.Stats(prof).sort_stats("tottime").print_stats(22)
pstats.Stats(prof).sort_stats("cumtime").print_stats(18)
s.engine.close()
