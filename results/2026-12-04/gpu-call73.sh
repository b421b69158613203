#!/bin/bash
# Call 73: the CPU site's kernel against a flat read of the same bytes on a host copy the
# size of the OLMoE shape's experts (lab/cpu_read_ceiling.py: product, eight rows an
# iteration, the read alone) on 16 and 15 threads; then the engine with every miss on the
# CPU site with numba's 16 threads and with 15 (a core left to the host's own thread and
# the driver's), interleaved. Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))" &
gen=$!
TAIL=8 step ceiling-16 150 python3 lab/cpu_read_ceiling.py 16 16
TAIL=8 step ceiling-15 150 python3 lab/cpu_read_ceiling.py 15 16
wait $gen
model="$TUNER_HOME/models/olmoe-shape-16x64-bf16"
sites="run --model $model --tokens 72 --cpu-pool 1 --pcie-frac 0 --expert-cache 16 --adapt-every 0 --json"
for i in 1 2 3; do
  [ $SECONDS -lt 500 ] || break
  TAIL=0 step "sites-16-$i" 45 python3 -m tuner $sites
  NUMBA_NUM_THREADS=15 TAIL=0 step "sites-15-$i" 45 python3 -m tuner $sites
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "sites-*.txt")), key=os.path.getmtime):
    text = open(f).read()
    try:
        r = json.loads(text[text.index("{"):])
    except ValueError:
        print(os.path.basename(f), "no JSON:", text[-300:]); continue
    d = r["phases"]["decode"]
    print(f"{os.path.basename(f):14s} decode {d['ms_per_token']:.2f} ms/token; layers "
          f"{d['layer_ms'] / d['tokens']:.2f}, CPU site {d['cpu_ms'] / d['tokens']:.2f}; "
          f"output {r['output_hash']}")
PY
pack_out call73
