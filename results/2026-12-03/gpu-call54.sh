#!/bin/bash
# Call 54: the prefetch section in short alternating turns (16 tokens a side, 20 pairs),
# on the demo (v5) on this tree and on ab-before/ (`git archive 171dfff tuner lab` with
# this tree's tuner/bench/prefetch.py, not committed), and on the OLMoE shape; where the
# disk store's stale prefetch spends its time on the demo (lab/profile_prefetch.py with
# STORE=disk). Carried: .whl and ab-before.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))"
suite demo-prefetch 100 --tokens 64 --only prefetch --set io_reader=kvikio
before demo-prefetch-before 100 --tokens 64 --only prefetch --set io_reader=kvikio
suite olmoe-prefetch 120 --tokens 64 --only prefetch --shape olmoe --set io_reader=kvikio
STORE=disk TAIL=2 step profile-prefetch-disk 100 python3 lab/profile_prefetch.py \
  "$TUNER_HOME/models/strata-demo-16x64-v5-bf16"
pack_out call54
