#!/bin/bash
# Call 74: the sites step settling a layer's counts, probe notes and pins under the next
# layer's body (after) against the tree before it (ab-before/, HEAD's tuner/), beside
# llama.cpp b11434 built with CUDA (-ncmoe 16: every expert on the CPU) in interleaved
# rounds on one host; then a layer's timeline on the host for both trees
# (lab/profile_cpu_site.py). Carried: .whl (with gguf), .llamacpp-src, ab-before.
source results/2026-12-02/gpu-lib.sh
TOTAL_S=300 bash results/2026-12-02/gpu-llamacpp.sh build > "$OUT/build-step.txt" 2>&1 &
build=$!
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))"
model="$TUNER_HOME/models/olmoe-shape-16x64-bf16"
gguf=$(python3 -c "from pathlib import Path; from tuner.llamacpp.convert import cached
print(cached(Path('$model'))[0])")
echo "gguf $gguf at $SECONDS s"
wait $build; tail -2 "$OUT/build-step.txt"
bench=$(python3 -c "from tuner import llamacpp; print(llamacpp.program('llama-bench', True))")
args="run --model $model --tokens 72 --cpu-pool 1 --pcie-frac 0 --expert-cache 16 --adapt-every 0 --json"
for i in 1 2 3; do
  [ $SECONDS -lt 400 ] || break
  TAIL=0 step "llamacpp-ncmoe16-$i" 60 "$bench" -m "$gguf" -p 0 -n 64 -r 3 -fa 0 -ngl 99 \
    -ncmoe 16 -o json
  TAIL=0 step "after-$i" 45 python3 -m tuner $args
  (cd ab-before && PYTHONPATH=$site:$PWD TAIL=0 step "before-$i" 45 python3 -m tuner $args)
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
TAIL=14 step profile-after 75 python3 lab/profile_cpu_site.py "$model"
(cd ab-before && PYTHONPATH=$site:$PWD TAIL=14 step profile-before 75 python3 ../lab/profile_cpu_site.py "$model")
pack_out call74
