#!/bin/bash
# Call 31, the disk store's misses read in place by the fix from the staging ring
# (miss_direct, the default) against uploading each first (miss_direct=0), in one tree.
# Part a: the engine's CUDA tests; the demo's disk miss path both ways, alternating; stale
# prefetch on the demo's disk store both ways. Part b: three more rounds of the miss path
# (lab/profile_miss.py now prints the stall too); the demo's machinery and prefetch.
# Part c: the demo's disk store both ways, with and without stale prefetch, interleaved
# (lab/ab_sessions.py); the OLMoE shape's read, limit and prefetch through KvikIO, and its limit uploading.
source results/2026-12-02/gpu-lib.sh
miss() {  # name, knobs...
  local name=$1; shift
  TAIL=1 step "$name" 120 python3 lab/profile_miss.py model= expert_store=disk \
    io_reader=kvikio "$@"
}
if [ "${1:-a}" = a ]; then
  TAIL=3 step pytest-cuda 200 python3 -m pytest -q -x -p no:cacheprovider \
    tests/engine/test_arena.py tests/engine/test_device_step.py tests/engine/test_fused.py \
    tests/engine/test_tiers.py tests/engine/test_session.py tests/engine/test_drop.py \
    tests/engine/test_prefill.py tests/engine/test_store.py tests/engine/test_kvikio_reads.py
  for round in 1 2; do
    miss miss-demo-disk-staged-$round
    miss miss-demo-disk-uploaded-$round miss_direct=0
  done
  miss miss-demo-disk-stale-staged prefetch=stale
  miss miss-demo-disk-stale-uploaded prefetch=stale miss_direct=0
elif [ "$1" = b ]; then
  for round in 3 4 5; do
    miss miss-demo-disk-staged-$round
    miss miss-demo-disk-uploaded-$round miss_direct=0
  done
  suite demo 150 --tokens 64 --only machinery,prefetch
else
  TAIL=5 step ab-demo-disk 200 python3 lab/ab_sessions.py \
    "expert_store=disk,io_reader=kvikio" "expert_store=disk,io_reader=kvikio,miss_direct=0" \
    "expert_store=disk,io_reader=kvikio,prefetch=stale" \
    "expert_store=disk,io_reader=kvikio,prefetch=stale,miss_direct=0"
  suite olmoe 260 --tokens 64 --only read,limit,prefetch --shape olmoe --set io_reader=kvikio
  suite olmoe-uploaded 120 --tokens 64 --only limit --shape olmoe \
    --set io_reader=kvikio,miss_direct=0
fi
