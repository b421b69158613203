#!/bin/bash
# Call 72: the host copy of every expert in huge pages (tuner/engine/memory/host_pages.py)
# against the tree before it (ab-before/, HEAD's tuner/): the CPU site's kernel on both
# copies in one process (lab/host_pages.py); the engine with every miss on the CPU site and
# with the RAM store (misses read in place from the host copy), interleaved; the CUDA
# tests. Carried: .whl, ab-before.
source results/2026-12-02/gpu-lib.sh
echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled); defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag)"
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))" &
gen=$!
cuda_tests 240
wait $gen
model="$TUNER_HOME/models/olmoe-shape-16x64-bf16"
TAIL=12 step host-pages 120 python3 lab/host_pages.py "$model" 4
sites="run --model $model --tokens 72 --cpu-pool 1 --pcie-frac 0 --expert-cache 16 --adapt-every 0 --json"
ram="run --model $model --tokens 72 --expert-store ram --json"
for i in 1 2 3; do
  [ $SECONDS -lt 520 ] || break
  TAIL=0 step "sites-after-$i" 45 python3 -m tuner $sites
  (cd ab-before && PYTHONPATH=$site:$PWD TAIL=0 step "sites-before-$i" 45 python3 -m tuner $sites)
  [ $i = 3 ] && continue
  TAIL=0 step "ram-after-$i" 40 python3 -m tuner $ram
  (cd ab-before && PYTHONPATH=$site:$PWD TAIL=0 step "ram-before-$i" 40 python3 -m tuner $ram)
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
    print(f"{os.path.basename(f):18s} decode {d['ms_per_token']:.2f} ms/token; layers "
          f"{d['layer_ms'] / d['tokens']:.2f}, CPU site {d['cpu_ms'] / d['tokens']:.2f}; "
          f"stall {d['stall_ms'] / d['tokens']:.2f}; output {r['output_hash']}")
PY
pack_out call72
