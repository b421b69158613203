#!/bin/bash
# Call 32, speculation read in place with the misses (no upload at arrival) where the disk
# store's misses are: the engine's CUDA tests (those call 31 did not reach after its
# stand-in failure, and the arena's and session's again); the demo's disk store with and
# without stale prefetch, read in place and uploaded, interleaved (lab/ab_sessions.py).
source results/2026-12-02/gpu-lib.sh
TAIL=3 step pytest-cuda 200 python3 -m pytest -q -p no:cacheprovider \
  tests/engine/test_store.py tests/engine/test_kvikio_reads.py tests/engine/test_arena.py \
  tests/engine/test_session.py tests/engine/test_device_step.py
TAIL=5 step ab-demo-disk 200 python3 lab/ab_sessions.py \
  "expert_store=disk,io_reader=kvikio" "expert_store=disk,io_reader=kvikio,prefetch=stale" \
  "expert_store=disk,io_reader=kvikio,miss_direct=0" \
  "expert_store=disk,io_reader=kvikio,prefetch=stale,miss_direct=0"
