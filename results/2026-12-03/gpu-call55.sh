#!/bin/bash
# Call 55: accelerate's offload against the engine from a cold arena (the peer section;
# transformers and accelerate are the image's own), RAM store and disk store through
# KvikIO; the limit section on the OLMoE shape with the RAM store (its bytes floor) and
# through KvikIO; the demo (v5) hit path and limit. Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(); synth.ensure(synth.shape('olmoe'))"
suite peer-ram 130 --tokens 64 --only peer --shape olmoe --set expert_store=ram
suite peer-disk 130 --tokens 64 --only peer --shape olmoe --set io_reader=kvikio
suite olmoe-ram-limit 100 --tokens 64 --only limit --shape olmoe --set expert_store=ram
suite olmoe-disk-limit 100 --tokens 64 --only limit --shape olmoe --set io_reader=kvikio
suite demo 90 --tokens 64 --only machinery,limit --set io_reader=kvikio
pack_out call55
