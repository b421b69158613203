#!/bin/bash
# Call 47 (at e7ee144): the engine's CUDA tests after 268ba24 (a layer run again matches its
# read-ahead by far row) and e7ee144, while llama-bench b11434 builds with CUDA; then, on the
# OLMoE shape with the disk store through KvikIO, the prefetch section (now with
# `same_output`), the llamacpp section (now with each store's `above` bracket, -ncmoe M-1),
# and where the CPU site's time goes: lab/cpu_site.py on 16 and 8 threads, and the engine
# with every miss on the CPU site (`tuner run --json`, its per-layer cpu_ms beside layer_ms).
# Carried: .whl and .llamacpp-src.
source results/2026-12-02/gpu-lib.sh
(TOTAL_S=330 bash results/2026-12-02/gpu-llamacpp.sh build > "$OUT/build-step.txt" 2>&1) &
build=$!
cuda_tests 230
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))"
wait $build; tail -2 "$OUT/build-step.txt"
SET=io_reader=kvikio TOTAL_S=140 bash results/2026-12-02/gpu-llamacpp.sh suite
suite olmoe-prefetch 100 --tokens 64 --only prefetch --shape olmoe --set io_reader=kvikio
step cpu-site-lab16 40 python3 lab/cpu_site.py 16
step cpu-site-lab8 40 python3 lab/cpu_site.py 8
step cpu-site-olmoe 60 python3 -m tuner run --model "$TUNER_HOME/models/olmoe-shape-16x64-bf16" \
  --tokens 40 --cpu-pool 1 --pcie-frac 0 --expert-cache 16 --adapt-every 0 --json
# at most eight files come back: one archive of them all
pack_out call47
