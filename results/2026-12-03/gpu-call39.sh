#!/bin/bash
# Call 39: the expert kernels' tiles swept (lab/expert_tiles.py) with `_down` split over
# the experts, and the engine's CUDA tests with it and with a token's q, k and v readied in
# one kernel (token_qkv.py).
source results/2026-12-02/gpu-lib.sh
TAIL=12 step tiles 300 python3 lab/expert_tiles.py
TAIL=3 step pytest-cuda 240 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_fused.py tests/engine/test_device_step.py tests/engine/test_session.py \
  tests/engine/test_arena.py tests/engine/test_prefill.py tests/engine/test_drop.py
