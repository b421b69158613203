#!/bin/bash
# Call 27: a layer that reads ahead runs as three graphs (front, copies on their own
# stream, experts), so its copies overlap the next layer's attention: the engine's CUDA
# tests; the demo's prefetch and machinery sections; the OLMoE shape's prefetch section
# through KvikIO, at prefetch_max 2 (the default) and 0 (every predicted miss).
source results/2026-12-02/gpu-lib.sh
TAIL=3 step pytest-cuda 170 python3 -m pytest -q -x -p no:cacheprovider \
  tests/engine/test_arena.py tests/engine/test_device_step.py tests/engine/test_tiers.py \
  tests/engine/test_session.py tests/engine/test_drop.py tests/engine/test_prefill.py
suite demo 90 --tokens 64 --only prefetch,machinery
suite olmoe 150 --tokens 64 --only prefetch --shape olmoe --set io_reader=kvikio
suite olmoe-all 110 --tokens 64 --only prefetch --shape olmoe --set io_reader=kvikio,prefetch_max=0
