#!/bin/bash
# Call 64: the CPU site's kernel reading bf16 pairs, four rows an iteration, and its outputs
# page-locked (68438bb): the sites' and CPU site's CUDA tests while the OLMoE shape is
# written, the engine with every miss on the CPU site and with half of them over the link
# (as calls 62-63), where a token goes, the kernel's variants again, and the sites section
# on the OLMoE shape. Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))" &
gen=$!
TAIL=2 step pytest-cuda 120 python3 -m pytest -q -p no:cacheprovider tests/engine/test_tiers.py \
  tests/engine/test_cpu_experts.py
wait $gen
model="$TUNER_HOME/models/olmoe-shape-16x64-bf16"
for frac in 0 0.5; do
  step cpu-site-olmoe-$frac 45 python3 -m tuner run --model "$model" \
    --tokens 40 --cpu-pool 1 --pcie-frac $frac --expert-cache 16 --adapt-every 0 --json
done
TAIL=12 step profile 120 python3 lab/profile_cpu_site.py "$model"
TAIL=10 step variants 120 python3 lab/cpu_bf16_variants.py 16
suite olmoe-sites 150 --tokens 32 --only sites --shape olmoe
pack_out call64
