#!/bin/bash
# Call 37: four layers queued after a quiet token against one, where tokens both hit and
# miss (lab/quiet_queue.py: the demo's disk store through KvikIO at arenas of 30-100 %).
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure()"
TAIL=6 step quiet-demo 300 python3 lab/quiet_queue.py "$TUNER_HOME/models/strata-demo-16x64-v4-bf16"
