#!/bin/bash
# Call 8 on the lent H200, right after call 7 on the same warm machine (models made), from
# the repository root with .whl carried, writing into $OUT: the read section with each
# reader on the demo model and the OLMoE shape; the demo's `tuner run --tokens 128` with
# each store; the prefetch, machinery and limit sections on both models (disk store, KvikIO);
# a layer's experts on the host's cores (lab/cpu_site.py).
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
site=$HOME/.cache/tuner-site
[ -d "$site/kvikio" ] || python3 -m pip install -q --no-index --no-deps --no-compile \
    --target "$site" .whl/*.whl
export PYTHONPATH="$site:$PWD"
step() {  # name, seconds, command...
  local name=$1 secs=$2; shift 2
  echo "== $name $(date +%T)"
  timeout "$secs" "$@" > "$OUT/$name.txt" 2>&1
  echo "$name rc $?"; cut -c1-400 "$OUT/$name.txt" | tail -${TAIL:-4}
}
suite() {  # name, seconds, gpu_suite arguments...
  local name=$1 secs=$2; shift 2
  step "$name" "$secs" python3 -m tuner.bench.gpu_suite --out "$OUT" --json-name "$name.json" "$@"
}
suite read-demo 90 --tokens 64 --only read
suite read-olmoe 150 --tokens 64 --only read --shape olmoe
step run-demo-ram 60 python3 -m tuner run --tokens 128 --expert-store ram
step run-demo-disk 60 python3 -m tuner run --tokens 128
suite demo 120 --tokens 64 --only prefetch,machinery,limit
suite olmoe 200 --tokens 64 --only prefetch,machinery,limit --shape olmoe
TAIL=5 step cpu-site 60 python3 lab/cpu_site.py 16
