#!/bin/bash
# Call 21: the probe scored once a token (not per layer) on CUDA: the engine's CUDA tests;
# the machinery and prefetch sections on the demo; the OLMoE shape's read, prefetch,
# machinery and limit sections through KvikIO (never measured before); cProfile of the
# OLMoE hit path beside the fully resident one.
source results/2026-12-02/gpu-lib.sh
TAIL=3 step pytest-cuda 150 python3 -m pytest -q -x -p no:cacheprovider \
  tests/engine/test_arena.py tests/engine/test_device_step.py tests/engine/test_tiers.py \
  tests/engine/test_session.py tests/engine/test_drop.py tests/engine/test_prefill.py
suite demo 90 --tokens 64 --only machinery,prefetch
suite olmoe-kvikio 260 --tokens 64 --only read,prefetch,machinery,limit --shape olmoe \
  --set io_reader=kvikio
TAIL=45 step profile-olmoe 60 python3 lab/profile_step.py "$TUNER_HOME/models/olmoe-shape-16x64-bf16"
