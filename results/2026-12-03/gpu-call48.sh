#!/bin/bash
# Call 48 (at e7ee144 with lab/cpu_kernels.py): which CPU kernel computes a layer of OLMoE's
# experts fastest in bf16 on the host's 16 and 8 cores (torch's products as the engine calls
# them, gemv, addmm, oneDNN on reordered weights, experts side by side); the demo's prefetch
# section on this tree. Carried: .whl.
source results/2026-12-02/gpu-lib.sh
step cpu-kernels16 90 python3 lab/cpu_kernels.py 16
step cpu-kernels8 90 python3 lab/cpu_kernels.py 8
python3 -c "from tuner.engine.weights import synth; synth.ensure()"
suite demo-prefetch 100 --tokens 64 --only prefetch --set io_reader=kvikio
pack_out call48
