#!/bin/bash
# Call 53: a body that reads ahead copies its set itself, at its start, on a stream of its
# own beside its attention and routing (no copy graph, no events between graphs), and a
# layer's kept misses are one launch (Arena.adopt): the engine's CUDA tests; what the kept
# copies cost the host (lab/kept_copies.py); the prefetch section on the demo (v5) on this
# tree and on ab-before/ (`git archive 171dfff tuner lab`, not committed), and on the
# OLMoE shape. Carried: .whl and ab-before.
source results/2026-12-02/gpu-lib.sh
cuda_tests 200
TAIL=3 step kept-copies 40 python3 lab/kept_copies.py
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))"
suite demo-prefetch 90 --tokens 64 --only prefetch --set io_reader=kvikio
before demo-prefetch-before 90 --tokens 64 --only prefetch --set io_reader=kvikio
suite olmoe-prefetch 110 --tokens 64 --only prefetch --shape olmoe --set io_reader=kvikio
pack_out call53
