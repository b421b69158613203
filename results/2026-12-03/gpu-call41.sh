#!/bin/bash
# Call 41, on call 40's machine right after it: the machinery section of the tree at
# c78c38f against 62a613c (ab-before/: `git archive 62a613c tuner lab`, not committed),
# alternating. The tree before runs from inside ab-before/: `python3 -m` puts the working
# folder first on the path, which made call 40's "before" runs import the new tree.
source results/2026-12-02/gpu-lib.sh
for r in 1 2; do
  suite demo-after-$r 60 --tokens 64 --only machinery
  (cd ab-before && PYTHONPATH=$site:$PWD python3 -m tuner.bench.gpu_suite --out $OUT \
    --json-name demo-before-$r.json --tokens 64 --only machinery > $OUT/demo-before-$r.txt 2>&1)
done
suite olmoe-after 90 --tokens 64 --only machinery --shape olmoe
(cd ab-before && PYTHONPATH=$site:$PWD python3 -m tuner.bench.gpu_suite --out $OUT \
  --json-name olmoe-before.json --tokens 64 --only machinery --shape olmoe > $OUT/olmoe-before.txt 2>&1)
