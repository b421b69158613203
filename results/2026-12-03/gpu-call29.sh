#!/bin/bash
# Call 29, the tree after the disk reads' fixes (one KvikIO request an expert through the
# page cache, a read's open pieces counted, a layer's misses issued together) and one
# float32 copy of a layer's MoE input:
# the engine's CUDA tests; the demo's disk miss path against the tree before them (05012d8,
# unpacked into ab-before/ by `git archive 05012d8 tuner lab`), alternating; the demo's
# machinery and prefetch; the OLMoE shape's read, machinery, limit and prefetch through KvikIO.
source results/2026-12-02/gpu-lib.sh
TAIL=3 step pytest-cuda 170 python3 -m pytest -q -x -p no:cacheprovider \
  tests/engine/test_arena.py tests/engine/test_device_step.py tests/engine/test_tiers.py \
  tests/engine/test_session.py tests/engine/test_drop.py tests/engine/test_prefill.py \
  tests/engine/test_store.py tests/engine/test_kvikio_reads.py
for round in 1 2; do
  for tree in before after; do
    root=$PWD; [ $tree = before ] && root=$PWD/ab-before
    TAIL=1 step miss-demo-disk-$tree-$round 120 env PYTHONPATH="$site:$root" \
      python3 "$root/lab/profile_miss.py" model= expert_store=disk io_reader=kvikio
  done
done
suite demo 100 --tokens 64 --only machinery,prefetch
suite olmoe 300 --tokens 64 --only read,machinery,limit,prefetch --shape olmoe \
  --set io_reader=kvikio
