#!/bin/bash
# Call 10 on the lent H200, from the repository root with .whl carried, writing into $OUT:
# versions; which order of KvikIO and torch's CUDA set-up crashes (kvikio_order.py, one
# process per case); the engine tests on CUDA after the engine's split into rooms; the
# demo's `tuner run --tokens 128` with each store.
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
TAIL=8 step versions 60 bash -c 'nvidia-smi --query-gpu=driver_version,name --format=csv;
  python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda)";
  ls $(python3 -c "import libkvikio, os; print(os.path.dirname(libkvikio.__file__))")/lib64 2>&1;
  ldd $(python3 -c "import libkvikio, os; print(os.path.dirname(libkvikio.__file__))")/lib64/libkvikio.so 2>&1 | grep -i "cud\|not found"'
for case in import-only kvikio-first torch-first no-compat; do
  TAIL=3 step "kvikio-$case" 60 python3 lab/kvikio_order.py "$case"
done
TAIL=3 step pytest-cuda 200 python3 -m pytest -q -x -p no:cacheprovider \
  tests/engine/test_arena.py tests/engine/test_device_step.py tests/engine/test_tiers.py \
  tests/engine/test_session.py tests/engine/test_drop.py tests/engine/test_prefill.py
step run-demo-ram 90 python3 -m tuner run --tokens 128 --expert-store ram
step run-demo-disk 90 python3 -m tuner run --tokens 128
