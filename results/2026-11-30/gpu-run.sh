#!/bin/bash
# One call on the lent H200, from the repository root: the engine tests on CUDA, then the GPU
# suite on the demo model and on the OLMoE shape (bf16, all 16 layers). Writes into $OUT.
# The machine has torch, transformers and accelerate but not the settings library: its
# wheels travel in .whl (pydantic, pydantic-settings and their needs, tomli-w).
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=/tmp/tuner-home
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
nvidia-smi > "$OUT/nvidia-smi.txt"
python3 -c "import torch, transformers, accelerate; print(torch.__version__, transformers.__version__, accelerate.__version__)"
STEP=${1:-all}
if [[ $STEP == all || $STEP == tests ]]; then
  timeout ${TESTS_S:-200} python3 -m pytest -q -x -p no:cacheprovider tests/engine \
      tests/measure/test_bench_sections.py > "$OUT/pytest-engine-cuda.txt" 2>&1
  echo "pytest rc $?"; tail -3 "$OUT/pytest-engine-cuda.txt"
fi
if [[ $STEP == all || $STEP == demo ]]; then
  timeout ${DEMO_S:-150} python3 -m tuner.measure.gpu_suite --out "$OUT" --tokens 64 \
      --only greedy,resident,machinery,link,limit --json-name demo.json
fi
if [[ $STEP == all || $STEP == olmoe ]]; then
  timeout ${OLMOE_S:-240} python3 -m tuner.measure.gpu_suite --out "$OUT" --shape olmoe \
      --tokens 64 --only link,machinery,limit,peer --json-name olmoe.json
fi
