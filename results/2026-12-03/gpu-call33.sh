#!/bin/bash
# Call 33, the tree after call 32 (misses and claimed speculation read in place from
# staging): the demo's prefetch and machinery sections; the OLMoE shape's limit and
# prefetch through KvikIO, and its limit with the RAM store.
source results/2026-12-02/gpu-lib.sh
suite demo 150 --tokens 64 --only machinery,prefetch
suite olmoe 300 --tokens 64 --only limit,prefetch --shape olmoe --set io_reader=kvikio
suite olmoe-ram 120 --tokens 64 --only limit --shape olmoe --set expert_store=ram
