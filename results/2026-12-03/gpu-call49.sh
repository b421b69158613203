#!/bin/bash
# Call 49: a layer that reads ahead takes no more device operations than one that does not
# (the set's match, the pack's rows and set written by the routing kernel; the prev
# predictor's flag only for prev): the engine's CUDA tests on this tree; the prefetch
# section, demo and OLMoE shape, on this tree and on ab-before/ (`git archive 31ca3ca tuner
# lab`, not committed; run from inside it), in turn. Carried: .whl and ab-before.
source results/2026-12-02/gpu-lib.sh
cuda_tests 230
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))"
suite demo-prefetch 80 --tokens 64 --only prefetch --set io_reader=kvikio
before demo-prefetch-before 80 --tokens 64 --only prefetch --set io_reader=kvikio
suite olmoe-prefetch 100 --tokens 64 --only prefetch --shape olmoe --set io_reader=kvikio
pack_out call49
