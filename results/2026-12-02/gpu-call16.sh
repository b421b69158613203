#!/bin/bash
# Call 16: KvikIO's availability probe reads into a buffer with room (the one-byte buffer
# it wrote past was call 15's finding). The demo through KvikIO with every read's CRC
# checked; the read and prefetch sections on both models with io_reader = kvikio (the read
# section then measures both readers against the store's best raw read).
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
  echo "$name rc $?"; cut -c1-600 "$OUT/$name.txt" | tail -${TAIL:-4}
}
suite() {  # name, seconds, gpu_suite arguments...
  local name=$1 secs=$2; shift 2
  step "$name" "$secs" python3 -m tuner.measure.gpu_suite --out "$OUT" --json-name "$name.json" "$@"
}
TAIL=3 step run-demo-kvikio-crc 90 python3 -m tuner run --tokens 128 --io-reader kvikio --verify-reads 2
TAIL=3 step run-demo-kvikio 90 python3 -m tuner run --tokens 128 --io-reader kvikio
suite demo-kvikio 150 --tokens 64 --only read,prefetch --set io_reader=kvikio
suite olmoe-kvikio 280 --tokens 64 --only read,prefetch --shape olmoe --set io_reader=kvikio
