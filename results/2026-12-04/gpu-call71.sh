#!/bin/bash
# Call 71 (call 70's tree): whether the package's spin reaches the engine's process
# (tuner/openmp.py), and the engine with every miss on the CPU site as the package sets it
# against GOMP_SPINCOUNT set in the environment (as call 69), interleaved. Carried: .whl.
source results/2026-12-02/gpu-lib.sh
ls -l /dev/nvidia* > "$OUT/dev.txt" 2>&1; head -3 "$OUT/dev.txt"
python3 -c "import tuner, os, sys; print('spin', os.environ.get('GOMP_SPINCOUNT'), 'torch loaded', 'torch' in sys.modules)"
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))"
model="$TUNER_HOME/models/olmoe-shape-16x64-bf16"
args="run --model $model --tokens 72 --cpu-pool 1 --pcie-frac 0 --expert-cache 16 --adapt-every 0 --json"
for i in 1 2; do
  TAIL=0 step "engine-$i" 40 python3 -m tuner $args
  GOMP_SPINCOUNT=30000000 TAIL=0 step "engine-env-$i" 40 python3 -m tuner $args
done
for f in "$OUT"/engine-*.txt; do
  python3 -c "import json,sys; t=open(sys.argv[1]).read(); r=json.JSONDecoder().raw_decode(t[t.index('{'):])[0]; d=r['phases']['decode']; print(sys.argv[1].rsplit('/',1)[1], d['ms_per_token'], round(d['cpu_ms']/d['tokens'],2))" "$f"
done
