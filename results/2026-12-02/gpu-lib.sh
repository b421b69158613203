# Sourced by the GPU calls from 21 on, from the repository root with .whl carried, writing
# into $OUT: installs the carried wheels into a site folder once per machine and defines
# `step NAME SECONDS COMMAND...` (output to $OUT/NAME.txt, its tail echoed) and
# `suite NAME SECONDS GPU_SUITE_ARGS...` (the GPU suite's JSON to $OUT/NAME.json); from
# call 44 on also `cuda_tests SECONDS` (the engine's CUDA tests), `before NAME SECONDS
# GPU_SUITE_ARGS...` (the suite on ab-before/'s tree, carried) and `pack_out NAME` ($OUT as
# one archive: only a few files come back from the machine).
# The wheels the image lacks (for Python 3.12, manylinux x86-64, `pip download --no-deps`):
# pydantic, pydantic-core, pydantic-settings, python-dotenv, typing-inspection,
# typing-extensions, annotated-types, tomli-w, fastapi, starlette, uvicorn, websockets,
# textual, platformdirs, mdit-py-plugins, linkify-it-py, uc-micro-py, opentelemetry-api,
# importlib-metadata, orjson, and for KvikIO kvikio-cu13, libkvikio-cu13 and rapids-logger
# (libkvikio links it: without it KvikIO does not load).
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
  echo "$name rc $?"; cut -c1-400 "$OUT/$name.txt" | tail -"${TAIL:-4}"
}
suite() {  # name, seconds, gpu_suite arguments...
  local name=$1 secs=$2; shift 2
  step "$name" "$secs" python3 -m tuner.bench.gpu_suite --out "$OUT" --json-name "$name.json" "$@"
}
cuda_tests() {  # seconds: the engine's CUDA tests
  TAIL=3 step pytest-cuda "$1" python3 -m pytest -q -p no:cacheprovider \
    tests/engine/test_fused.py tests/engine/test_device_step.py tests/engine/test_session.py \
    tests/engine/test_arena.py tests/engine/test_prefill.py tests/engine/test_drop.py
}
before() {  # name, seconds, gpu_suite arguments: the suite on ab-before/'s tree
  local name=$1 secs=$2; shift 2
  (cd ab-before && PYTHONPATH=$site:$PWD step "$name" "$secs" python3 -m tuner.bench.gpu_suite \
    --out "$OUT" --json-name "$name.json" "$@")
}
pack_out() {  # name: everything under $OUT as $OUT/NAME.tgz
  (cd "$OUT" && tar czf "/tmp/$1.tgz" . && find . -mindepth 1 -delete && mv "/tmp/$1.tgz" .)
}
