#!/bin/bash
# Call 25: each layer timed by the one event that also wakes the host (no pair of its
# own): the engine's CUDA tests; the machinery section on the demo and the OLMoE shape;
# the demo's `tuner run --tokens 128` with each store.
source results/2026-12-02/gpu-lib.sh
TAIL=3 step pytest-cuda 150 python3 -m pytest -q -x -p no:cacheprovider \
  tests/engine/test_arena.py tests/engine/test_device_step.py tests/engine/test_tiers.py \
  tests/engine/test_session.py tests/engine/test_drop.py tests/engine/test_prefill.py
suite demo 60 --tokens 64 --only machinery
suite olmoe 90 --tokens 64 --only machinery --shape olmoe
step run-demo-ram 90 python3 -m tuner run --tokens 128 --expert-store ram
step run-demo-disk 90 python3 -m tuner run --tokens 128
