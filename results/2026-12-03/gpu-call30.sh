#!/bin/bash
# Call 30, a layer's arrived reads uploaded as one batch (4 MB or the layer's last): the
# engine's CUDA tests; the demo's disk miss path against the tree before it (f259957,
# unpacked into ab-before/ by `git archive f259957 tuner lab`), alternating; where stale
# prefetch's host time goes on the demo's disk store; the demo's machinery and prefetch;
# the OLMoE shape's limit and prefetch through KvikIO.
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
TAIL=1 step miss-demo-disk-stale 120 python3 lab/profile_miss.py model= expert_store=disk \
  io_reader=kvikio prefetch=stale
suite demo 100 --tokens 64 --only machinery,prefetch
suite olmoe 240 --tokens 64 --only limit,prefetch --shape olmoe --set io_reader=kvikio
