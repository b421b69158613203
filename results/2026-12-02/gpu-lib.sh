# Sourced by the GPU calls from 21 on, from the repository root with .whl carried, writing
# into $OUT: installs the carried wheels into a site folder once per machine and defines
# `step NAME SECONDS COMMAND...` (output to $OUT/NAME.txt, its tail echoed) and
# `suite NAME SECONDS GPU_SUITE_ARGS...` (the GPU suite's JSON to $OUT/NAME.json).
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
