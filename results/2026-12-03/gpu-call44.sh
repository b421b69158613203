#!/bin/bash
# Call 44 (at 8f6267b): the engine's CUDA tests after the review commit, while llama-bench
# b11434 builds with CUDA; then, on the OLMoE shape with the disk store through KvikIO
# (rapids-logger carried), the llamacpp section (the disk store against llama.cpp
# -ncmoe in one run), the read and limit sections (reads against the store's raw read,
# the token against its store-priced floor), and the prefetch section with at most one
# predicted miss read ahead a layer (prefetch_max 1; the default is 2).
# Carried: .whl and .llamacpp-src.
source results/2026-12-02/gpu-lib.sh
(TOTAL_S=330 bash results/2026-12-02/gpu-llamacpp.sh build > "$OUT/build-step.txt" 2>&1) &
build=$!
cuda_tests 240
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))"
wait $build; tail -2 "$OUT/build-step.txt"
SET=io_reader=kvikio TOTAL_S=110 bash results/2026-12-02/gpu-llamacpp.sh suite
suite olmoe-disk 100 --tokens 64 --only read,limit --shape olmoe --set io_reader=kvikio
suite olmoe-prefetch-max1 80 --tokens 64 --only prefetch --shape olmoe \
  --set io_reader=kvikio,prefetch_max=1
# at most eight files come back: one archive of them all
pack_out call44
