#!/bin/bash
# Call 14: the native backtrace of `tuner run --io-reader kvikio`'s crash, through the CUDA
# toolkit's gdb (the image has no plain gdb).
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
site=$HOME/.cache/tuner-site
[ -d "$site/kvikio" ] || python3 -m pip install -q --no-index --no-deps --no-compile \
    --target "$site" .whl/*.whl
export PYTHONPATH="$site:$PWD"
dbg=$(command -v cuda-gdb || ls /usr/local/cuda*/bin/cuda-gdb 2>/dev/null | head -1)
echo "debugger: ${dbg:-none}"
[ -n "$dbg" ] && timeout 240 "$dbg" -batch -ex "set pagination off" -ex run -ex bt \
  -ex "info threads" --args python3 -m tuner run --tokens 8 --io-reader kvikio 2>&1 \
  | grep -v "^\[New Thread\|^\[Thread .* exited\|^warning: " | tail -60
