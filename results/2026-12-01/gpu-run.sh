#!/bin/bash
# Calls on the lent H200, from the repository root; writes into $OUT. Steps, in the order
# given: tests (engine, quality gate, bench sections and tune tests on CUDA), quality
# (tuner quality on the bf16 demo model: the lossy knobs' KL, agreement and bytes on the
# GPU engine, to set beside the CPU table), prefill (batched against per-token prefill),
# tune (a gated tune on the demo model, its best saved and A/B-tested), tune2 (the same
# with this version's defaults: lossy knobs tried off or on, the closing A/B of 4 pairs),
# aa (the baseline against itself, 2 pairs).
# The machine's image lacks the settings, web and study libraries: their wheels travel in
# .whl (pydantic, pydantic-settings, fastapi, starlette, uvicorn, websockets, optuna,
# sqlalchemy, alembic and their needs).
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
python3 -m pip install -q --no-index --no-deps --no-compile --target "$HOME/.cache/tuner-site" .whl/*.whl \
    && export PYTHONPATH="$HOME/.cache/tuner-site"
nvidia-smi > "$OUT/nvidia-smi.txt"
python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"
for step in "$@"; do
  echo "== $step $(date +%T)"
  case $step in
    tests) timeout ${TESTS_S:-240} python3 -m pytest -q -p no:cacheprovider tests/engine \
             tests/measure/test_bench_sections.py tests/measure/test_quality_gate.py \
             tests/measure/test_rules.py tests/tune -k "not ray" > "$OUT/pytest-cuda.txt" 2>&1
           echo "pytest rc $?"; tail -5 "$OUT/pytest-cuda.txt" ;;
    quality) timeout ${QUALITY_S:-240} python3 -m tuner quality --tokens 256 \
               --sweep moce_bonus=0,0.85 --sweep drop_cold=0,0.05,0.1,0.2 --json \
               > "$OUT/quality.json" 2> "$OUT/quality.err"
             echo "quality rc $?"; tail -2 "$OUT/quality.err" ;;
    prefill) timeout ${PREFILL_S:-120} python3 -m tuner bench --only prefill --json \
               > "$OUT/prefill.json" 2> "$OUT/prefill.err"
             echo "prefill rc $?"; tail -c 600 "$OUT/prefill.json" ;;
    tune) timeout ${TUNE_S:-200} python3 -m tuner tune --trials ${TRIALS:-10} --tokens 64 \
            --max-kl 0.005 --storage "$OUT/tune.db" --save-best gpu-tuned --ab-pairs 2 \
            --ab-tokens 128 > "$OUT/tune.txt" 2> "$OUT/tune.err"
          echo "tune rc $?"; tail -25 "$OUT/tune.txt" ;;
    tune2) timeout ${TUNE_S:-300} python3 -m tuner tune --trials ${TRIALS:-12} --tokens 64 \
             --max-kl 0.005 --storage "$OUT/tune2.db" --save-best gpu-tuned2 --overwrite \
             --ab-tokens 128 > "$OUT/tune2.txt" 2> "$OUT/tune2.err"
           echo "tune2 rc $?"; cat "$OUT/tune2.txt" ;;
    aa) timeout 120 python3 -m tuner ab baseline baseline --pairs 2 --tokens 128 \
          > "$OUT/ab-aa2.txt" 2>&1; echo "aa rc $?"; tail -4 "$OUT/ab-aa2.txt" ;;
  esac
done
