#!/bin/bash
# Call 26, the merged tree (typed views, recipes, v4 figures, one event a layer): the
# engine's CUDA tests; greedy tokens against transformers and bit-identity with the fully
# resident model (greedy, resident); the demo's machinery and prefetch sections.
source results/2026-12-02/gpu-lib.sh
TAIL=3 step pytest-cuda 150 python3 -m pytest -q -x -p no:cacheprovider \
  tests/engine/test_arena.py tests/engine/test_device_step.py tests/engine/test_tiers.py \
  tests/engine/test_session.py tests/engine/test_drop.py tests/engine/test_prefill.py
suite demo 150 --tokens 64 --only greedy,resident,machinery,prefetch
