#!/bin/bash
# Call 36: llama.cpp beside the engine again, on the tree of call 35: llama-bench built with
# CUDA from the carried sdist, then the gpu suite's llamacpp section on the OLMoE shape
# (the engine fully resident and at its 20 % arena with the RAM and the disk store through
# KvikIO; llama-bench fully resident, -ncmoe at the same budget, every expert on the CPU).
# Carried: .whl and .llamacpp-src (see gpu-llamacpp.sh's header).
source results/2026-12-02/gpu-lib.sh
SET=io_reader=kvikio TOTAL_S=${TOTAL_S:-570} bash results/2026-12-02/gpu-llamacpp.sh ${STEPS:-build suite}
