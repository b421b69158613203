#!/bin/bash
# Call 76: the read section on the demo v5's 0.6 MB experts through KvikIO, the engine's
# readers and pieces in turn (io_workers 8, 32, 16; io_piece_kib 256, 1024), each against
# the store's best raw read measured in the same run. Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure()"
for v in "8 256" "32 256" "32 1024" "16 1024" "8 1024"; do
  set -- $v
  [ $SECONDS -lt 330 ] || break
  suite "demo-read-w$1-p$2" 75 --tokens 64 --only read \
    --set "io_reader=kvikio,io_workers=$1,io_piece_kib=$2"
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "demo-read-*.json")), key=os.path.getmtime):
    r = json.load(open(f))
    r = r.get("read", r.get("sections", {}).get("read", r))
    e = r.get("engine", {})
    print(f"{os.path.basename(f):26s} engine {r.get('engine_gbps')} / raw {r.get('raw_gbps')} "
          f"= {r.get('ratio')}; {e.get('ms_per_token')} ms/token, hit {e.get('hit_rate')}")
PY
