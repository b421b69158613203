#!/bin/bash
# The disk store's two readers on the lent H200, from the repository root with .whl carried;
# writes into $OUT. Steps:
# 1. installs the wheels in .whl (KvikIO 26.10: kvikio_cu13, libkvikio_cu13, rapids_logger;
#    the settings libraries as for gpu-hot.sh) into a target folder, says whether KvikIO
#    reads here;
# 2. the readers' tests (TESTS: tests/engine/test_store.py, test_kvikio_reads.py and
#    tests/bench/test_bench_read.py), the library's included: the shared policy on each
#    reader, the same bytes as the reader threads, the engine's same tokens and counts with
#    either reader, auto picking KvikIO on the GPU (with KvikIO installed, auto picks it for
#    every engine test on CUDA: TESTS="tests/engine tests/bench" runs them all on it);
# 3. the read section (`--only read`) on the demo model and on the OLMoE shape, once with
#    io_reader = threads and once with kvikio (READERS): every run measures the store's best
#    raw read (each reader, a deep queue, large requests, O_DIRECT) and the engine's reads
#    while serving misses with both readers; io_reader picks the headline. One line each:
#    `(a) read: engine X GB/s while serving misses (READER) / store Y GB/s raw (...) = R;
#    OTHER Z GB/s = R2`, and read-MODEL-READER.json with every figure.
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
python3 -m pip install -q --no-index --no-deps --no-compile --target "$HOME/.cache/tuner-site" .whl/*.whl \
    && export PYTHONPATH="$HOME/.cache/tuner-site"
python3 -m pip list 2>/dev/null | grep -i -E "^(torch|cupy|nvidia-cufile|cuda-pathfinder|kvikio)"
python3 -c "from tuner.engine.memory.kvikio_reads import problem; print('KvikIO:', problem() or 'reads here')"
echo "== tests $(date +%T)"
timeout ${TESTS_S:-240} python3 -m pytest -q -rs -p no:cacheprovider \
    ${TESTS:-tests/engine/test_store.py tests/engine/test_kvikio_reads.py tests/bench/test_bench_read.py} \
    > "$OUT/pytest-read.txt" 2>&1
echo "pytest rc $?"; tail -6 "$OUT/pytest-read.txt"
for model in demo olmoe; do
  shape=(); [ $model = olmoe ] && shape=(--shape olmoe)
  for reader in ${READERS:-threads kvikio}; do
    name=read-$model-$reader
    echo "== $name $(date +%T)"
    timeout ${SUITE_S:-240} python3 -m tuner.bench.gpu_suite --out "$OUT" --json-name "$name.json" \
        --tokens 64 --only read --set io_reader=$reader "${shape[@]}" \
        > "$OUT/$name.txt" 2>&1
    echo "rc $?"
    python3 -c "import json, sys; from tuner.bench.read import text
r = json.load(open(sys.argv[1]))['read']; print(r.get('error') or text(r))" "$OUT/$name.json"
  done
done
