#!/bin/bash
# Call 56: the hit path against the fully resident model after calls 53's changes (OLMoE
# shape and demo v5); the prefetch section with one predicted miss read ahead a layer
# (prefetch_max 1) beside the default 2, on the OLMoE shape and the demo; the demo's
# default prefetch section again. Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))"
suite olmoe-machinery 60 --tokens 64 --only machinery --shape olmoe
suite demo-machinery 40 --tokens 64 --only machinery
suite olmoe-prefetch-max1 120 --tokens 64 --only prefetch --shape olmoe --set io_reader=kvikio,prefetch_max=1
suite demo-prefetch-max1 100 --tokens 64 --only prefetch --set io_reader=kvikio,prefetch_max=1
suite demo-prefetch 100 --tokens 64 --only prefetch --set io_reader=kvikio
pack_out call56
