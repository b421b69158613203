#!/bin/bash
# Call 34: the engine's CUDA tests on the tidied staged fix (f8d797a); where the hit path's
# time beyond the resident model's goes, inside a token or between tokens
# (lab/token_boundary.py), on the demo and the OLMoE shape.
source results/2026-12-02/gpu-lib.sh
TAIL=3 step pytest-cuda 260 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_arena.py tests/engine/test_device_step.py tests/engine/test_fused.py \
  tests/engine/test_session.py tests/engine/test_drop.py tests/engine/test_prefill.py \
  tests/engine/test_store.py tests/engine/test_kvikio_reads.py
python3 -c "from tuner.engine.weights import synth; synth.ensure()"
TAIL=7 step boundary-demo 90 python3 lab/token_boundary.py "$TUNER_HOME/models/strata-demo-16x64-v4-bf16"
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))"
TAIL=7 step boundary-olmoe 120 python3 lab/token_boundary.py "$TUNER_HOME/models/olmoe-shape-16x64-bf16"
