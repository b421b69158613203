#!/bin/bash
# Call 24: lab/hit_ahead.py again (the launch's host time alone), and the hit path with
# the layers' timing events off, on the demo and the OLMoE shape.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))"
TAIL=4 step ahead-demo 90 python3 lab/hit_ahead.py "$TUNER_HOME/models/strata-demo-16x64-v4-bf16"
TAIL=4 step ahead-olmoe 120 python3 lab/hit_ahead.py "$TUNER_HOME/models/olmoe-shape-16x64-bf16"
