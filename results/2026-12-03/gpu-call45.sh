#!/bin/bash
# Call 45: read-ahead beside the layers. The engine's CUDA tests on this tree (the copy of
# a set of speculation rows queued by the host on its own stream, after the body that
# chose it, waited for only by the body that reads it); then the prefetch section (stale /
# none, RAM and disk store through KvikIO) on the OLMoE shape with ab-before/ holding
# 8c440aa (`git archive 8c440aa tuner lab`, not committed: the copy in a few programs a
# row, still joined at the end of the choosing layer) and with this tree, run from inside
# ab-before/ for the former; then the demo's prefetch section on this tree.
# Carried: .whl and ab-before.
source results/2026-12-02/gpu-lib.sh
cuda_tests 220
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))"
(cd ab-before && PYTHONPATH=$site:$PWD step olmoe-prefetch-8c440aa 100 python3 -m \
  tuner.bench.gpu_suite --out "$OUT" --json-name olmoe-prefetch-8c440aa.json --tokens 64 \
  --only prefetch --shape olmoe --set io_reader=kvikio)
suite olmoe-prefetch 100 --tokens 64 --only prefetch --shape olmoe --set io_reader=kvikio
suite demo-prefetch 80 --tokens 64 --only prefetch --set io_reader=kvikio
pack_out call45
