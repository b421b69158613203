#!/bin/bash
# Call 6 on the lent H200, from the repository root, writing into $OUT: the engine and
# bench-section tests on CUDA with warm-up and read-ahead on the device, then the demo
# model's `tuner run --tokens 128` with each store and the prefetch section on the demo
# model and the OLMoE shape. The settings and web libraries travel as wheels in .whl.
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
python3 -m pip install -q --no-index --no-deps --no-compile --target "$HOME/.cache/tuner-site" \
    .whl/*.whl && export PYTHONPATH="$HOME/.cache/tuner-site:$PWD"
nvidia-smi > "$OUT/nvidia-smi.txt"
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())"
step() {  # name, seconds, command...
  local name=$1 secs=$2; shift 2
  echo "== $name $(date +%T)"
  timeout "$secs" "$@" > "$OUT/$name.txt" 2>&1
  echo "$name rc $?"; cut -c1-300 "$OUT/$name.txt" | tail -${TAIL:-6}
}
TAIL=12 step pytest-cuda ${TESTS_S:-200} python3 -m pytest -q -x -p no:cacheprovider \
  tests/engine/test_arena.py tests/engine/test_device_step.py tests/engine/test_fused.py \
  tests/engine/test_session.py tests/engine/test_drop.py tests/engine/test_predict.py \
  tests/bench/test_bench_sections.py
step run-demo-ram 90 python3 -m tuner run --tokens 128 --expert-store ram
step run-demo-disk 90 python3 -m tuner run --tokens 128
step suite-demo 120 python3 -m tuner.bench.gpu_suite --out "$OUT" --json-name demo.json \
  --tokens 64 --only prefetch,machinery,limit
step suite-olmoe ${OLMOE_S:-240} python3 -m tuner.bench.gpu_suite --out "$OUT" \
  --json-name olmoe.json --shape olmoe --tokens 64 --only prefetch,limit
