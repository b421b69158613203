#!/bin/bash
# Call 70 (the tree of call 69 with tuner/openmp.py: GOMP_SPINCOUNT set when the package is
# imported beside a GPU): llama.cpp b11434 built with CUDA while the OLMoE shape's GGUF is
# written and the CUDA tests of the sites, the CPU site, the device step and openmp.py
# run; then rounds of llama-bench -ncmoe 16 and the engine with every miss on the CPU site,
# nothing set in the environment; a layer's timeline on the host; the sites section.
# Carried: .whl (with gguf), .llamacpp-src.
source results/2026-12-02/gpu-lib.sh
TOTAL_S=300 bash results/2026-12-02/gpu-llamacpp.sh build > "$OUT/build-step.txt" 2>&1 &
build=$!
TAIL=3 step pytest-cuda 200 python3 -m pytest -q -p no:cacheprovider tests/test_openmp.py \
  tests/engine/test_tiers.py tests/engine/test_cpu_experts.py tests/engine/test_device_step.py &
tests=$!
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))"
model="$TUNER_HOME/models/olmoe-shape-16x64-bf16"
gguf=$(python3 -c "from pathlib import Path; from tuner.llamacpp.convert import cached
print(cached(Path('$model'))[0])")
echo "gguf $gguf at $SECONDS s"
wait $tests $build; tail -2 "$OUT/build-step.txt"
bench=$(python3 -c "from tuner import llamacpp; print(llamacpp.program('llama-bench', True))")
args="run --model $model --tokens 72 --cpu-pool 1 --pcie-frac 0 --expert-cache 16 --adapt-every 0 --json"
for i in 1 2 3 4; do
  [ $SECONDS -lt 380 ] || break
  TAIL=0 step "llamacpp-ncmoe16-$i" 60 "$bench" -m "$gguf" -p 0 -n 64 -r 3 -fa 0 -ngl 99 \
    -ncmoe 16 -o json
  TAIL=0 step "engine-$i" 50 python3 -m tuner $args
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*-[0-9].txt")), key=os.path.getmtime):
    name, text = os.path.basename(f), open(f).read()
    try:
        r = json.JSONDecoder().raw_decode(text[text.index("[\n  {"):] if
                                          name.startswith("llamacpp") else
                                          text[text.index("{"):])[0]
    except ValueError:
        print(name, "no JSON:", text[-300:]); continue
    if name.startswith("llamacpp"):
        t = r[0]
        print(f"{name:22s} {1000 / t['avg_ts']:.2f} ms/token ({t['avg_ts']:.2f} +- "
              f"{t['stddev_ts']:.2f} tok/s, {t['n_threads']} threads)")
        continue
    d = r["phases"]["decode"]
    print(f"{name:22s} decode {d['ms_per_token']:.2f} ms/token; layers "
          f"{d['layer_ms'] / d['tokens']:.2f}, CPU site {d['cpu_ms'] / d['tokens']:.2f}; "
          f"output {r['output_hash']}")
PY
TAIL=12 step profile 80 python3 lab/profile_cpu_site.py "$model"
left=$((575 - SECONDS))
[ $left -gt 60 ] && suite olmoe-sites $left --tokens 32 --only sites --shape olmoe
pack_out call70
