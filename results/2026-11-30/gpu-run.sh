#!/bin/bash
# Calls on the lent H200, from the repository root; writes into $OUT. Steps, in the order
# given: tests (the engine tests on CUDA), demo (the GPU suite on the bf16 demo model),
# olmoe (the suite on the OLMoE shape, bf16, all 16 layers, default settings), olmoe-io
# (the same with io_piece_kib=2048 and io_workers=16), olmoe-pf (as olmoe-io, with stale
# prefetch), profile (cProfile of a token).
# The machine has torch, transformers and accelerate but not the settings library: its
# wheels travel in .whl (pydantic, pydantic-settings and their needs, tomli-w).
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
python3 -m pip install -q --no-index --no-deps --no-compile --target "$HOME/.cache/tuner-site" .whl/*.whl \
    && export PYTHONPATH="$HOME/.cache/tuner-site"
nvidia-smi > "$OUT/nvidia-smi.txt"
python3 -c "import torch, transformers, accelerate; print(torch.__version__, transformers.__version__, accelerate.__version__)"
OLMOE="$TUNER_HOME/models/olmoe-shape-16x64-bf16"
SUITE="python3 -m tuner.bench.gpu_suite --out $OUT --tokens 64"
for step in "$@"; do
  echo "== $step"
  case $step in
    tests) timeout ${TESTS_S:-200} python3 -m pytest -q -x -p no:cacheprovider tests/engine \
             tests/measure/test_bench_sections.py > "$OUT/pytest-engine-cuda.txt" 2>&1
           echo "pytest rc $?"; tail -3 "$OUT/pytest-engine-cuda.txt" ;;
    demo) timeout ${DEMO_S:-150} $SUITE --only ${DEMO_ONLY:-greedy,resident,machinery,link,limit} \
            --json-name demo.json ;;
    olmoe) timeout ${OLMOE_S:-240} $SUITE --shape olmoe \
             --only ${OLMOE_ONLY:-link,machinery,limit,peer} --json-name olmoe.json ;;
    olmoe-io) timeout ${OLMOE_IO_S:-200} $SUITE --shape olmoe --set io_piece_kib=2048,io_workers=16 \
                --only ${OLMOE_IO_ONLY:-link,limit,peer} --json-name olmoe-io.json ;;
    olmoe-pf) timeout ${OLMOE_PF_S:-150} $SUITE --shape olmoe \
                --set io_piece_kib=2048,io_workers=16,prefetch=stale \
                --only ${OLMOE_PF_ONLY:-limit,peer} --json-name olmoe-pf.json ;;
    profile) python3 -c "from tuner.engine import synth; synth.ensure(synth.shape('olmoe'))"
             PYTHONPATH=.:${PYTHONPATH:-} timeout 120 python3 lab/profile_step.py "$OLMOE" ;;
  esac
done
