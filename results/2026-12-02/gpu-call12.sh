#!/bin/bash
# Call 12, on the machine call 11 left warm: the engine's start with the KvikIO reader in
# stages (kvikio_stages.py), all of them and then each of the dense layers, the reader and
# the arena's rows left out, each in its own process.
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
site=$HOME/.cache/tuner-site
[ -d "$site/kvikio" ] || python3 -m pip install -q --no-index --no-deps --no-compile \
    --target "$site" .whl/*.whl
export PYTHONPATH="$site:$PWD"
for skip in "" decoder rows "decoder rows" reader; do
  echo "== skip: ${skip:-none}"
  timeout 60 python3 lab/kvikio_stages.py $skip 2>&1 | grep -v "^  File\|^Extension\|^$" | head -8
done
