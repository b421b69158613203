#!/bin/bash
# Call 75: the engine's CUDA tests on 2b8bd1a (the sites step's counts under the next
# body), with the sites', the CPU site's and openmp's. Carried: .whl.
source results/2026-12-02/gpu-lib.sh
TAIL=3 step pytest-cuda 400 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_fused.py tests/engine/test_device_step.py tests/engine/test_session.py \
  tests/engine/test_arena.py tests/engine/test_prefill.py tests/engine/test_drop.py \
  tests/engine/test_tiers.py tests/engine/test_cpu_experts.py tests/test_openmp.py
