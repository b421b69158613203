#!/bin/bash
# Call 65: the CPU site's kernel on the calling thread (no worker round trip), the sites'
# CUDA tests while the OLMoE shape is written, the engine with every miss on the CPU site
# and with half over the link, where a token goes, and why the kernel runs slower inside a
# token than back to back (lab/cpu_site_gaps.py: gaps between calls, a worker thread,
# OpenMP's wait policy, numba's workqueue layer). Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))" &
gen=$!
TAIL=2 step pytest-cuda 120 python3 -m pytest -q -p no:cacheprovider tests/engine/test_tiers.py \
  tests/engine/test_cpu_experts.py
wait $gen
TAIL=6 step gaps 150 python3 lab/cpu_site_gaps.py 16
model="$TUNER_HOME/models/olmoe-shape-16x64-bf16"
for frac in 0 0.5; do
  step cpu-site-olmoe-$frac 45 python3 -m tuner run --model "$model" \
    --tokens 40 --cpu-pool 1 --pcie-frac $frac --expert-cache 16 --adapt-every 0 --json
done
TAIL=12 step profile 120 python3 lab/profile_cpu_site.py "$model"
pack_out call65
