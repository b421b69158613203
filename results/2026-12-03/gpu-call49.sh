#!/bin/bash
# Call 49: a layer that reads ahead takes no more device operations than one that does not
# (the set's match, the pack's rows and set written by the routing kernel; the prev
# predictor's flag only for prev): the engine's CUDA tests on this tree; the prefetch
# section, demo and OLMoE shape, on this tree and on ab-before/ (`git archive 31ca3ca tuner
# lab`, not committed; run from inside it), in turn. Carried: .whl and ab-before.
source results/2026-12-02/gpu-lib.sh
TAIL=3 step pytest-cuda 230 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_fused.py tests/engine/test_device_step.py tests/engine/test_session.py \
  tests/engine/test_arena.py tests/engine/test_prefill.py tests/engine/test_drop.py
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))"
before() {  # name, seconds, gpu_suite arguments: the suite on ab-before/'s tree
  local name=$1 secs=$2; shift 2
  (cd ab-before && PYTHONPATH=$site:$PWD step "$name" "$secs" python3 -m tuner.bench.gpu_suite \
    --out "$OUT" --json-name "$name.json" "$@")
}
suite demo-prefetch 80 --tokens 64 --only prefetch --set io_reader=kvikio
before demo-prefetch-before 80 --tokens 64 --only prefetch --set io_reader=kvikio
suite olmoe-prefetch 100 --tokens 64 --only prefetch --shape olmoe --set io_reader=kvikio
(cd "$OUT" && tar czf /tmp/call49.tgz . && find . -type f -delete && mv /tmp/call49.tgz .)
