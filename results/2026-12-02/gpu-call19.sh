#!/bin/bash
# Call 19: the demo's `tuner run --tokens 128` from the disk store with each reader, without
# and with stale prefetch, back to back on one machine (KvikIO with torch's context made
# first and its probe reading a page into a page).
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
site=$HOME/.cache/tuner-site
[ -d "$site/kvikio" ] || python3 -m pip install -q --no-index --no-deps --no-compile \
    --target "$site" .whl/*.whl
export PYTHONPATH="$site:$PWD"
for pf in off stale; do
  for reader in threads kvikio; do
    echo "== reader $reader, prefetch $pf"
    timeout 90 python3 -m tuner run --tokens 128 --io-reader $reader --prefetch $pf 2>&1 \
      | grep "ms/token" | tee "$OUT/run-$reader-$pf.txt"
  done
done
