#!/bin/bash
# Call 66 (at 22a7f27): the engine's CUDA tests with the sites' and the CPU site's while the
# OLMoE shape is written; every miss on the CPU site with OpenMP's threads left as they are,
# spinning between calls (OMP_WAIT_POLICY=ACTIVE, set at the process's start, and set in the
# process after torch loaded, before numba's thread layer did), and spinning longer than by
# default (GOMP_SPINCOUNT); the sites section on the OLMoE shape. Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))" &
gen=$!
TAIL=3 step pytest-cuda 200 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_fused.py tests/engine/test_device_step.py tests/engine/test_session.py \
  tests/engine/test_arena.py tests/engine/test_prefill.py tests/engine/test_drop.py \
  tests/engine/test_tiers.py tests/engine/test_cpu_experts.py
wait $gen
model="$TUNER_HOME/models/olmoe-shape-16x64-bf16"
args="run --model $model --tokens 40 --cpu-pool 1 --pcie-frac 0 --expert-cache 16 --adapt-every 0 --json"
step cpu-site-olmoe 45 python3 -m tuner $args
OMP_WAIT_POLICY=ACTIVE step cpu-site-olmoe-active 45 python3 -m tuner $args
step cpu-site-olmoe-active-late 45 python3 -c "import os, runpy, sys, torch
os.environ['OMP_WAIT_POLICY'] = 'ACTIVE'
sys.argv = ['tuner', *sys.argv[1:]]
runpy.run_module('tuner', run_name='__main__')" $args
GOMP_SPINCOUNT=10000000 step cpu-site-olmoe-spin10m 45 python3 -m tuner $args
suite olmoe-sites 150 --tokens 32 --only sites --shape olmoe
pack_out call66
