#!/bin/bash
# Call 9 on the lent H200, from the repository root with .whl carried, writing into $OUT:
# the engine tests on CUDA that cover read-ahead, the probe and the CPU site; the prefetch,
# machinery and limit sections on the demo model and the OLMoE shape (the reader threads);
# the OLMoE shape with every miss on the CPU site (cpu_pool, pcie_frac 0, 16 slots).
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
site=$HOME/.cache/tuner-site
[ -d "$site/pydantic" ] || python3 -m pip install -q --no-index --no-deps --no-compile \
    --target "$site" .whl/*.whl
export PYTHONPATH="$site:$PWD"
step() {  # name, seconds, command...
  local name=$1 secs=$2; shift 2
  echo "== $name $(date +%T)"
  timeout "$secs" "$@" > "$OUT/$name.txt" 2>&1
  echo "$name rc $?"; cut -c1-500 "$OUT/$name.txt" | tail -${TAIL:-4}
}
suite() {  # name, seconds, gpu_suite arguments...
  local name=$1 secs=$2; shift 2
  step "$name" "$secs" python3 -m tuner.bench.gpu_suite --out "$OUT" --json-name "$name.json" "$@"
}
TAIL=3 step pytest-cuda 130 python3 -m pytest -q -x -p no:cacheprovider \
  tests/engine/test_arena.py tests/engine/test_device_step.py tests/engine/test_tiers.py \
  tests/engine/test_session.py
suite demo 100 --tokens 64 --only machinery,limit,prefetch
suite olmoe 200 --tokens 64 --only machinery,limit,prefetch --shape olmoe
step cpu-site-olmoe 100 python3 -m tuner run --model "$TUNER_HOME/models/olmoe-shape-16x64-bf16" \
  --tokens 40 --cpu-pool 1 --pcie-frac 0 --expert-cache 16 --adapt-every 0
