#!/bin/bash
# Call 15: the crash's first native frames (cuda-gdb), and `tuner run --io-reader kvikio`
# with the availability probe reading into a large buffer (kvikio_probe_buffer.py).
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
site=$HOME/.cache/tuner-site
[ -d "$site/kvikio" ] || python3 -m pip install -q --no-index --no-deps --no-compile \
    --target "$site" .whl/*.whl
export PYTHONPATH="$site:$PWD"
timeout 240 /usr/local/cuda/bin/cuda-gdb -batch -ex "set pagination off" -ex run -ex "bt 10" \
  --args python3 -m tuner run --tokens 8 --io-reader kvikio 2>&1 \
  | grep -v "^\[New Thread\|^\[Thread .* exited\|^warning: " | grep -A12 "SIGSEGV"
for i in 1 2; do
  echo "== probe into 1 MiB, run $i"
  timeout 120 python3 lab/kvikio_probe_buffer.py --tokens 64 --io-reader kvikio 2>&1 \
    | grep -v "^  File\|^Extension\|^$\|^prompt\|^output" | head -8
done
