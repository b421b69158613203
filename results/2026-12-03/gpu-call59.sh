#!/bin/bash
# Call 59 (at f9310d1): the engine's CUDA tests with the sites' and the CPU site's own while
# the models are written; the engine with every miss on the CPU site, now through numba's
# bf16 kernel (call 58: torch); the disk store's reads with 1 MiB pieces (lab/read_submit.py
# in call 58: half the host's cost a read at 8 readers, the same rate) at 8 and 32 workers
# on the demo v5 and 8 on the OLMoE shape; the OLMoE disk store's limit and the demo's
# prefetch section with 1 MiB pieces. Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))" &
gen=$!
TAIL=3 step pytest-cuda 230 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_fused.py tests/engine/test_device_step.py tests/engine/test_session.py \
  tests/engine/test_arena.py tests/engine/test_prefill.py tests/engine/test_drop.py \
  tests/engine/test_tiers.py tests/engine/test_cpu_experts.py
wait $gen
step cpu-site-olmoe 60 python3 -m tuner run --model "$TUNER_HOME/models/olmoe-shape-16x64-bf16" \
  --tokens 40 --cpu-pool 1 --pcie-frac 0 --expert-cache 16 --adapt-every 0 --json
suite demo-read-p1024-w8 60 --tokens 64 --only read --set io_reader=kvikio,io_piece_kib=1024
suite demo-read-p1024-w32 60 --tokens 64 --only read --set io_reader=kvikio,io_piece_kib=1024,io_workers=32
suite olmoe-read-p1024-w8 60 --tokens 64 --only read --shape olmoe --set io_reader=kvikio,io_piece_kib=1024
suite olmoe-disk-limit-p1024 100 --tokens 64 --only limit --shape olmoe --set io_reader=kvikio,io_piece_kib=1024
suite demo-prefetch-p1024 110 --tokens 64 --only prefetch --set io_reader=kvikio,io_piece_kib=1024
pack_out call59
