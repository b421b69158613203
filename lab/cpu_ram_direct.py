"""The RAM store on the CPU with misses read in place against copied in first: the demo
model at the default settings, 64 tokens warm, then 64 timed, one session each. Run from
the repository root: PYTHONPATH=. python lab/cpu_ram_direct.py"""

from dataclasses import replace

import torch

from tuner.engine.session.session import Session
from tuner.settings import load, to_config

torch.set_num_threads(1)
base = replace(to_config(load()), expert_store="ram")
for direct in (True, False):
    s = Session(replace(base, miss_direct=direct))
    try:
        s.run(64)
        s.reset_counters()
        s.run(64)
        t = s.snapshot()["totals"]
        print(f"miss_direct {int(direct)}: {t['ms_per_token']} ms/token, "
              f"{t['sync_misses_per_token']} misses a token, "
              f"{t['bytes_direct']} bytes read in place")
    finally:
        s.engine.close()
