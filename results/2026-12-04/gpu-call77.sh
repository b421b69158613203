#!/bin/bash
# Call 77: as call 76, the engine's default readers (io_workers 8) against 32, in
# alternating turns, 256 KiB pieces, on the demo v5 through KvikIO. Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure()"
for i in 1 2 3; do
  for w in 8 32; do
    [ $SECONDS -lt 240 ] || break 2
    suite "demo-read-w$w-$i" 60 --tokens 64 --only read --set "io_reader=kvikio,io_workers=$w"
  done
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "demo-read-*.json")), key=os.path.getmtime):
    r = json.load(open(f))["read"]
    e = r["engine"]
    print(f"{os.path.basename(f):22s} engine {r['engine_gbps']} / raw {r['raw_gbps']} "
          f"= {r['ratio']}; {e['ms_per_token']} ms/token, hit {e['hit_rate']}")
PY
pack_out call77
