#!/bin/bash
# Call 46: a set's read-ahead copy as one graph that waits for its body's chosen event and
# signals its own copied event itself (one replay a layer on the host, where call 45's
# tree, 3b493b6, queued a wait, the replay and a record). The engine's CUDA tests on this tree;
# the demo's prefetch section with this tree and with ab-before/ (`git archive 3b493b6 tuner
# lab`, not committed; run from inside it), in turn; the OLMoE shape's prefetch section
# on this tree. Carried: .whl and ab-before.
source results/2026-12-02/gpu-lib.sh
cuda_tests 220
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))"
suite demo-prefetch 80 --tokens 64 --only prefetch --set io_reader=kvikio
before demo-prefetch-before 80 --tokens 64 --only prefetch --set io_reader=kvikio
suite olmoe-prefetch 100 --tokens 64 --only prefetch --shape olmoe --set io_reader=kvikio
pack_out call46
