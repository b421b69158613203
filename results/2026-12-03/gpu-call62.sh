#!/bin/bash
# Call 62: the kernel without the GIL (nogil): the sites' and the CPU site's CUDA tests while
# the OLMoE shape is written, then the engine with every miss on the CPU site as in calls
# 58-61, and with half the misses over the link (pcie_frac 0.5), the two sites side by side.
# Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))" &
gen=$!
TAIL=2 step pytest-cuda 60 python3 -m pytest -q -p no:cacheprovider tests/engine/test_tiers.py \
  tests/engine/test_cpu_experts.py
wait $gen
for frac in 0 0.5; do
  step cpu-site-olmoe-$frac 45 python3 -m tuner run --model "$TUNER_HOME/models/olmoe-shape-16x64-bf16" \
    --tokens 40 --cpu-pool 1 --pcie-frac $frac --expert-cache 16 --adapt-every 0 --json
done
pack_out call62
