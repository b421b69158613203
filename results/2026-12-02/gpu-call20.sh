#!/bin/bash
# Call 20: KvikIO's probe reads a page into a pinned page (call 19's page-aligned mmap page
# was refused with EFAULT); the demo's `tuner run --tokens 128` through KvikIO without and
# with stale prefetch, then the read and prefetch sections with io_reader = kvikio.
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
site=$HOME/.cache/tuner-site
[ -d "$site/kvikio" ] || python3 -m pip install -q --no-index --no-deps --no-compile \
    --target "$site" .whl/*.whl
export PYTHONPATH="$site:$PWD"
for pf in off stale; do
  echo "== reader kvikio, prefetch $pf"
  timeout 90 python3 -m tuner run --tokens 128 --io-reader kvikio --prefetch $pf 2>&1 \
    | grep -v "^prompt\|^output" | tail -3 | tee "$OUT/run-kvikio-$pf.txt"
done
timeout 200 python3 -m tuner.measure.gpu_suite --out "$OUT" --json-name demo-kvikio.json \
  --tokens 64 --only read,prefetch --set io_reader=kvikio 2>&1 | cut -c1-700 | tail -3
