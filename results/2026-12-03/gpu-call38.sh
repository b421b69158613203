#!/bin/bash
# Call 38, the final tree: the engine's CUDA tests (the layers' events made as one list a
# set), lab/token_boundary.py on the machinery section's shared set-up, and the demo's
# machinery section.
source results/2026-12-02/gpu-lib.sh
TAIL=3 step pytest-cuda 150 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_device_step.py tests/engine/test_session.py tests/engine/test_arena.py \
  tests/engine/test_prefill.py tests/engine/test_drop.py
python3 -c "from tuner.engine.weights import synth; synth.ensure()"
TAIL=1 step boundary-demo 60 python3 lab/token_boundary.py "$TUNER_HOME/models/strata-demo-16x64-v4-bf16"
suite demo 60 --tokens 64 --only machinery
