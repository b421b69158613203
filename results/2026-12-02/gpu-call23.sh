#!/bin/bash
# Call 23: the hit path with 1, 2 and 3 layers queued ahead of the host, and the host's
# own time per layer (lab/hit_ahead.py), on the demo and the OLMoE shape.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))"
TAIL=3 step ahead-demo 90 python3 lab/hit_ahead.py "$TUNER_HOME/models/strata-demo-16x64-v4-bf16"
TAIL=3 step ahead-olmoe 120 python3 lab/hit_ahead.py "$TUNER_HOME/models/olmoe-shape-16x64-bf16"
