#!/bin/bash
# Call 17 (and 18, with torch's CUDA context made before KvikIO is first used): KvikIO's probe
# reads a page into a page-aligned page, the read section's rows are
# pinned (page-aligned, as the engine's staging ring). The read and prefetch sections on
# both models with io_reader = kvikio, each reader against the store's best raw read.
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
  echo "$name rc $?"; cut -c1-900 "$OUT/$name.txt" | tail -${TAIL:-4}
}
suite() {  # name, seconds, gpu_suite arguments...
  local name=$1 secs=$2; shift 2
  step "$name" "$secs" python3 -m tuner.measure.gpu_suite --out "$OUT" --json-name "$name.json" "$@"
}
suite demo-kvikio 150 --tokens 64 --only read,prefetch --set io_reader=kvikio
suite olmoe-kvikio 300 --tokens 64 --only read,prefetch --shape olmoe --set io_reader=kvikio
