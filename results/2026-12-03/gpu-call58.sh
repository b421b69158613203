#!/bin/bash
# Call 58: the engine's CUDA tests after the CPU's widening changes (4c245fe-65ce1ae), while
# the models are written; the demo v5's reads with 16 and 32 KvikIO workers (call 57: 0.818
# of the raw read at 8); what a read costs the host to submit (lab/read_submit.py) on both
# models; a layer of OLMoE's experts read in place in bf16 by a numba kernel against torch's
# (lab/cpu_bf16.py, 16 and 8 threads); the engine with every miss on the CPU site.
# Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "import numba, numpy; print('numba', numba.__version__, 'numpy', numpy.__version__)"
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))" &
gen=$!
cuda_tests 230
wait $gen
suite demo-read-w16 70 --tokens 64 --only read --set io_reader=kvikio,io_workers=16
suite demo-read-w32 70 --tokens 64 --only read --set io_reader=kvikio,io_workers=32
step cpu-bf16-16 60 python3 lab/cpu_bf16.py 16
step cpu-bf16-8 40 python3 lab/cpu_bf16.py 8
step cpu-site-olmoe 60 python3 -m tuner run --model "$TUNER_HOME/models/olmoe-shape-16x64-bf16" \
  --tokens 40 --cpu-pool 1 --pcie-frac 0 --expert-cache 16 --adapt-every 0 --json
TAIL=12 step read-submit-demo 60 python3 lab/read_submit.py "$TUNER_HOME/models/strata-demo-16x64-v5-bf16"
TAIL=12 step read-submit-olmoe 60 python3 lab/read_submit.py "$TUNER_HOME/models/olmoe-shape-16x64-bf16"
pack_out call58
