#!/bin/bash
# Call 60 (at the tree of call 59 with lab/profile_cpu_site.py): where the token goes with
# every miss on the CPU site through numba's kernel (call 59: 68.8 ms/token, the site's own
# compute 37.5 of it, against a layer's kernel at 1.55-1.60 ms alone in call 58), with
# numba's default threads (all 16 cores) and with 14. Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))"
model="$TUNER_HOME/models/olmoe-shape-16x64-bf16"
TAIL=40 step profile-cpu-site 150 python3 lab/profile_cpu_site.py "$model"
NUMBA_NUM_THREADS=14 TAIL=3 step profile-cpu-site-14 150 python3 lab/profile_cpu_site.py "$model"
pack_out call60
