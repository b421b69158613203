#!/bin/bash
# Call 35: the last token counted under the next token's first layers, and four layers
# queued after a token that ran each layer once: the engine's CUDA tests; where the hit
# path's time goes now (lab/token_boundary.py); the demo's machinery and prefetch sections
# and the OLMoE shape's machinery and prefetch (disk store through KvikIO).
source results/2026-12-02/gpu-lib.sh
TAIL=3 step pytest-cuda 200 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_arena.py tests/engine/test_device_step.py tests/engine/test_fused.py \
  tests/engine/test_session.py tests/engine/test_drop.py tests/engine/test_prefill.py \
  tests/engine/test_store.py tests/engine/test_kvikio_reads.py
python3 -c "from tuner.engine.weights import synth; synth.ensure()"
TAIL=2 step boundary-demo 90 python3 lab/token_boundary.py "$TUNER_HOME/models/strata-demo-16x64-v4-bf16"
suite demo 150 --tokens 64 --only machinery,prefetch
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))"
TAIL=2 step boundary-olmoe 120 python3 lab/token_boundary.py "$TUNER_HOME/models/olmoe-shape-16x64-bf16"
suite olmoe 200 --tokens 64 --only machinery,prefetch --shape olmoe --set io_reader=kvikio
