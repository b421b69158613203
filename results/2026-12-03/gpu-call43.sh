#!/bin/bash
# Call 43: after the layer's kernels were fused, the OLMoE shape's RAM store against its
# floors (limit section) and stale prefetch against none on both stores (prefetch section,
# disk through KvikIO, whose wheels now include rapids-logger: call 42 lacked it).
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))"
suite olmoe-ram-limit 80 --tokens 64 --only limit --shape olmoe --set expert_store=ram
suite olmoe-prefetch 120 --tokens 64 --only prefetch --shape olmoe --set io_reader=kvikio
