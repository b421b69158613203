#!/bin/bash
# Call 61 (at the tree of call 60): llama.cpp b11434 built with CUDA, then the llamacpp
# section on the OLMoE shape (every expert on the CPU with -ncmoe 16 among its rows) and,
# on the same machine right after, the engine with every miss on the CPU site through
# numba's kernel (as calls 58-59), so the CPU site's ratio to llama.cpp comes from one host.
# Carried: .whl and .llamacpp-src.
source results/2026-12-02/gpu-lib.sh
TOTAL_S=300 bash results/2026-12-02/gpu-llamacpp.sh build > "$OUT/build-step.txt" 2>&1
tail -2 "$OUT/build-step.txt"
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))"
SET=io_reader=kvikio TOTAL_S=170 bash results/2026-12-02/gpu-llamacpp.sh suite
step cpu-site-olmoe 70 python3 -m tuner run --model "$TUNER_HOME/models/olmoe-shape-16x64-bf16" \
  --tokens 40 --cpu-pool 1 --pcie-frac 0 --expert-cache 16 --adapt-every 0 --json
pack_out call61
