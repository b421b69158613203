#!/bin/bash
# Call 13, on the machine call 12 left warm: KvikIO's crash narrowed further
# (kvikio_stages.py): garbage collected after each stage, torch's context made first, and
# KvikIO's pool made at the reader's size from the start (KVIKIO_NTHREADS, so the reader
# does not rebuild it); then `tuner run --io-reader kvikio` the same ways.
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
site=$HOME/.cache/tuner-site
[ -d "$site/kvikio" ] || python3 -m pip install -q --no-index --no-deps --no-compile \
    --target "$site" .whl/*.whl
export PYTHONPATH="$site:$PWD"
show() { grep -v "^  File\|^Extension\|^$" | head -${1:-12}; }
for skip in "decoder gc" "decoder ctx"; do
  echo "== stages, skip: $skip"
  timeout 60 python3 lab/kvikio_stages.py $skip 2>&1 | show
done
echo "== stages, skip: decoder, KVIKIO_NTHREADS=8"
KVIKIO_NTHREADS=8 timeout 60 python3 lab/kvikio_stages.py decoder 2>&1 | show
echo "== run, KVIKIO_NTHREADS=8"
KVIKIO_NTHREADS=8 timeout 90 python3 -X faulthandler -m tuner run --tokens 16 --io-reader kvikio 2>&1 | show 6
echo "== run, gc disabled"
timeout 90 python3 -X faulthandler -c "import gc, sys; gc.disable(); sys.argv = ['tuner', 'run', '--tokens', '16', '--io-reader', 'kvikio']; from tuner.cli import script; script()" 2>&1 | show 6
