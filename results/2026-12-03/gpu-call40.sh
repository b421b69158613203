#!/bin/bash
# Call 40: a layer in fewer, faster kernels (the expert tiles of call 39, a token's q, k
# and v readied in one kernel, its router's logits in one kernel and its top k, weights and
# rows in another, residual sums written in place): the engine's CUDA tests; the demo's and
# the OLMoE shape's machinery section against the tree before (ab-before/, `git archive
# 62a613c tuner lab`, not committed), alternating; the kernel table of a resident token and
# a hit token (lab/profile_device.py). The "before" runs imported the new tree (`python3
# -m` puts the working folder first on the path): void, repeated by call 41.
source results/2026-12-02/gpu-lib.sh
TAIL=3 step pytest-cuda 200 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_fused.py tests/engine/test_device_step.py tests/engine/test_session.py \
  tests/engine/test_arena.py tests/engine/test_prefill.py tests/engine/test_drop.py
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))"
for round in 1 2; do
  suite demo-after-$round 60 --tokens 64 --only machinery
  PYTHONPATH=$site:$PWD/ab-before suite demo-before-$round 60 --tokens 64 --only machinery
done
suite olmoe-after 90 --tokens 64 --only machinery --shape olmoe
PYTHONPATH=$site:$PWD/ab-before suite olmoe-before 90 --tokens 64 --only machinery --shape olmoe
TAIL=2 step profile-olmoe 120 python3 lab/profile_device.py "$TUNER_HOME/models/olmoe-shape-16x64-bf16"
