#!/bin/bash
# Call 42: llama.cpp beside the engine after the layer's kernels were fused (calls 39-41):
# llama-bench b11434 built with CUDA from the carried sdist, the gpu suite's llamacpp
# section on the OLMoE shape (as call 36), then its prefetch section (stale / none, RAM and
# disk store through KvikIO). Carried: .whl and .llamacpp-src.
source results/2026-12-02/gpu-lib.sh
SET=io_reader=kvikio TOTAL_S=470 bash results/2026-12-02/gpu-llamacpp.sh build suite
suite olmoe-prefetch 110 --tokens 64 --only prefetch --shape olmoe --set io_reader=kvikio
