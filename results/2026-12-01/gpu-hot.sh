#!/bin/bash
# Calls on the lent H200 for the device-first decode step, from the repository root; writes
# into $OUT. Steps, in the order given: tests (engine and bench-section tests on CUDA),
# demo (gpu_suite on the bf16 demo model), olmoe (gpu_suite on the OLMoE shape, 16 layers,
# bf16, default settings), olmoe-pf (the same with stale-gate prefetch), olmoe-ram and
# demo-ram (experts held in host memory: expert_store=ram), ab (stale-gate prefetch against
# the baseline in matched pairs, on the demo model).
# The image lacks the settings, web and study libraries: their wheels travel in .whl.
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
python3 -m pip install -q --no-index --no-deps --no-compile --target "$HOME/.cache/tuner-site" .whl/*.whl \
    && export PYTHONPATH="$HOME/.cache/tuner-site"
nvidia-smi > "$OUT/nvidia-smi.txt"
python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"
suite() {  # name, seconds, gpu_suite arguments...
  local name=$1 secs=$2; shift 2
  timeout "$secs" python3 -m tuner.bench.gpu_suite --out "$OUT" --json-name "$name.json" "$@" \
    > "$OUT/$name.txt" 2>&1
  echo "$name rc $?"; cut -c1-400 "$OUT/$name.txt" | tail -12
}
for step in "$@"; do
  echo "== $step $(date +%T)"
  case $step in
    tests) timeout ${TESTS_S:-200} python3 -m pytest -q -x -p no:cacheprovider ${TESTS:-tests/engine \
             tests/measure/test_bench_sections.py} > "$OUT/pytest-cuda.txt" 2>&1
           echo "pytest rc $?"; tail -15 "$OUT/pytest-cuda.txt" ;;
    demo) suite demo ${DEMO_S:-150} --tokens 64 --only ${DEMO_ONLY:-greedy,resident,machinery,limit,link} ;;
    olmoe) suite olmoe ${OLMOE_S:-240} --shape olmoe --tokens 64 \
             --only ${OLMOE_ONLY:-machinery,limit,link,peer} ${OLMOE_SET:+--set $OLMOE_SET} ;;
    olmoe-pf) suite olmoe-pf ${OLMOE_S:-150} --shape olmoe --tokens 64 --set prefetch=stale \
                --only ${OLMOE_ONLY:-limit,link} ;;
    olmoe-ram) suite olmoe-ram ${RAM_S:-200} --shape olmoe --tokens 64 --set expert_store=ram \
                 --only ${RAM_ONLY:-limit,link,peer} ;;
    demo-ram) suite demo-ram ${RAM_S:-120} --tokens 64 --set expert_store=ram \
                --only ${RAM_ONLY:-machinery,limit,link} ;;
    ab) timeout ${AB_S:-200} python3 -m tuner ab baseline stale-prefetch --pairs ${PAIRS:-3} \
          --tokens 128 ${AB_SET:-} > "$OUT/ab.txt" 2>&1; echo "ab rc $?"; tail -22 "$OUT/ab.txt" ;;
  esac
done
