#!/bin/bash
# Call 51: call 50 again, with each setting's timeline of three tokens (Chrome traces,
# gzipped): where the compute stream waits with stale prefetch. Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure()"
mkdir -p "$OUT/traces"
TAIL=2 step profile-prefetch 240 python3 lab/profile_prefetch.py \
  "$TUNER_HOME/models/strata-demo-16x64-v4-bf16" "$OUT/traces"
pack_out call51
