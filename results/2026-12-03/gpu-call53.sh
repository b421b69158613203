#!/bin/bash
# Call 53: a body that reads ahead copies its set itself, at its start, on a stream of its
# own beside its attention and routing (no copy graph, no events between graphs), and a
# layer's kept misses are one launch (Arena.adopt): the engine's CUDA tests; what the kept
# copies cost the host (lab/kept_copies.py); the prefetch section on the demo (v5) on this
# tree and on ab-before/ (`git archive 171dfff tuner lab`, not committed), and on the
# OLMoE shape. Carried: .whl and ab-before.
source results/2026-12-02/gpu-lib.sh
TAIL=3 step pytest-cuda 200 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_fused.py tests/engine/test_device_step.py tests/engine/test_session.py \
  tests/engine/test_arena.py tests/engine/test_prefill.py tests/engine/test_drop.py
TAIL=3 step kept-copies 40 python3 lab/kept_copies.py
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))"
before() {  # name, seconds, gpu_suite arguments: the suite on ab-before/'s tree
  local name=$1 secs=$2; shift 2
  (cd ab-before && PYTHONPATH=$site:$PWD step "$name" "$secs" python3 -m tuner.bench.gpu_suite \
    --out "$OUT" --json-name "$name.json" "$@")
}
suite demo-prefetch 90 --tokens 64 --only prefetch --set io_reader=kvikio
before demo-prefetch-before 90 --tokens 64 --only prefetch --set io_reader=kvikio
suite olmoe-prefetch 110 --tokens 64 --only prefetch --shape olmoe --set io_reader=kvikio
(cd "$OUT" && tar czf /tmp/call53.tgz . && find . -type f -delete && mv /tmp/call53.tgz .)
