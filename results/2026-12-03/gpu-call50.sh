#!/bin/bash
# Call 50: where stale prefetch's extra time goes on the demo with the RAM store (call 49:
# 1.18 of none's time for 1.04 of its bytes, with or without the routing kernel's
# read-ahead match): lab/profile_prefetch.py, prefetch off and stale, twice in turn.
# Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure()"
TAIL=2 step profile-prefetch 300 python3 lab/profile_prefetch.py "$TUNER_HOME/models/strata-demo-16x64-v4-bf16"
