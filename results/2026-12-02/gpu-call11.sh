#!/bin/bash
# Call 11, on the machine call 10 left warm (demo model made), from the repository root
# with .whl carried, writing into $OUT: KvikIO's crash narrowed (the reader's settings and
# the engine's reader in kvikio_order.py; `tuner run --io-reader kvikio` under faulthandler
# and, where gdb is installed, its native backtrace); then the read, prefetch, machinery and
# limit sections on the demo model and the OLMoE shape with the reader threads.
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
for case in settings reader; do
  TAIL=4 step "kvikio-$case" 60 python3 lab/kvikio_order.py "$case"
done
TAIL=12 step kvikio-run 60 python3 -X faulthandler -m tuner run --tokens 8 --io-reader kvikio
if command -v gdb > /dev/null; then
  TAIL=30 step kvikio-gdb 120 gdb -batch -ex run -ex bt --args python3 -m tuner run --tokens 8 --io-reader kvikio
else
  echo "no gdb"
fi
suite demo 150 --tokens 64 --only read,prefetch,machinery,limit
suite olmoe 260 --tokens 64 --only read,prefetch,machinery,limit --shape olmoe
