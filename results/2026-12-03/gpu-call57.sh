#!/bin/bash
# Call 57: the disk store's reads through KvikIO against the store's raw read (the read
# section, O_DIRECT), at the demo v5's 0.6 MB experts and the OLMoE shape's 12.6 MB ones.
# Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))"
suite demo-read 70 --tokens 64 --only read --set io_reader=kvikio
suite olmoe-read 80 --tokens 64 --only read --shape olmoe --set io_reader=kvikio
pack_out call57
