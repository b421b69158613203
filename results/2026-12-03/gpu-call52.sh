#!/bin/bash
# Call 52: the link section on the OLMoE shape, uploads against a plain pinned copy
# measured in the same run, with misses uploaded (miss_direct 0: by default they are read
# in place and nothing is uploaded), RAM store and disk store through KvikIO; and the RAM
# store as it runs by default (its bytes read in place, bytes_direct). Carried: .whl.
source results/2026-12-02/gpu-lib.sh
python3 -c "from tuner.engine.weights import synth; synth.ensure(synth.shape('olmoe'))"
suite link-ram-upload 60 --tokens 32 --only link --shape olmoe --set expert_store=ram,miss_direct=0
suite link-disk-upload 60 --tokens 32 --only link --shape olmoe --set io_reader=kvikio,miss_direct=0
suite link-ram 50 --tokens 32 --only link --shape olmoe --set expert_store=ram
pack_out call52
