#!/bin/bash
# Call 22: the hit path's device time, kernel by kernel, beside the fully resident path
# (lab/profile_device.py, OLMoE shape); accelerate's offload against the engine from a
# cold arena (the peer section) with the RAM store and the disk store (KvikIO).
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))"
TAIL=60 step profile-device 90 python3 lab/profile_device.py "$TUNER_HOME/models/olmoe-shape-16x64-bf16"
suite peer-ram 150 --tokens 64 --only peer --shape olmoe --set expert_store=ram
suite peer-disk 180 --tokens 64 --only peer --shape olmoe --set io_reader=kvikio
