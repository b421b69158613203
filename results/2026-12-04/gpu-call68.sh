#!/bin/bash
# Call 68: the CPU site's ending captured (finish_cpu: the outputs up in one copy, their sum
# and the residual one graph replay) against the tree before it (ab-before/, HEAD's tuner/),
# interleaved, with every miss on the CPU site; the same with OpenMP's threads spinning
# between calls; a layer's timeline on the host (lab/profile_cpu_site.py); the CUDA tests
# of the sites, the CPU site and the device step. Carried: .whl, ab-before.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))" &
gen=$!
TAIL=3 step pytest-cuda 200 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_tiers.py tests/engine/test_cpu_experts.py tests/engine/test_device_step.py
wait $gen
model="$TUNER_HOME/models/olmoe-shape-16x64-bf16"
args="run --model $model --tokens 72 --cpu-pool 1 --pcie-frac 0 --expert-cache 16 --adapt-every 0 --json"
for i in 1 2 3; do
  (cd ab-before && PYTHONPATH=$site:$PWD TAIL=0 step "before-$i" 60 python3 -m tuner $args)
  TAIL=0 step "after-$i" 60 python3 -m tuner $args
  [ $i = 3 ] || OMP_WAIT_POLICY=ACTIVE TAIL=0 step "after-active-$i" 60 python3 -m tuner $args
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*-[0-9].txt")), key=os.path.getmtime):
    text = open(f).read()
    try:
        r = json.loads(text[text.index("{"):])
    except ValueError:
        print(os.path.basename(f), "no JSON:", text[-300:]); continue
    d = r["phases"]["decode"]
    print(f"{os.path.basename(f):22s} decode {d['ms_per_token']:.2f} ms/token; layers "
          f"{d['layer_ms'] / d['tokens']:.2f}, CPU site {d['cpu_ms'] / d['tokens']:.2f}; "
          f"warm-up {d['warmup_ms']:.0f} ms; output {r['output_hash']}")
PY
TAIL=40 step profile 120 python3 lab/profile_cpu_site.py "$model"
pack_out call68
