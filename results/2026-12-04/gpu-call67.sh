#!/bin/bash
# Call 67: the CPU site's kernel on the calling thread only with every miss on the CPU
# (pcie_frac 0), on its worker beside the link: every miss on the CPU site once more and the
# sites section on the OLMoE shape (call 64: the worker always; call 66: the calling thread
# always). Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))"
model="$TUNER_HOME/models/olmoe-shape-16x64-bf16"
step cpu-site-olmoe 45 python3 -m tuner run --model "$model" --tokens 40 --cpu-pool 1 \
  --pcie-frac 0 --expert-cache 16 --adapt-every 0 --json
suite olmoe-sites 150 --tokens 32 --only sites --shape olmoe
pack_out call67
