#!/bin/bash
# Call 9 on the H200: a profile of the miss path (RAM store), the RAM store with stale-gate
# prefetch, and an A/B of stale-gate prefetch on the RAM store with seed 000's rules.
set -u
export PYTHONUNBUFFERED=1 TUNER_HOME=$HOME/.cache/tuner
python3 -m pip install -q --no-index --no-deps --no-compile --target "$HOME/.cache/tuner-site" .whl/*.whl && export PYTHONPATH="$HOME/.cache/tuner-site"
timeout 100 python3 lab/profile_miss.py > $OUT/profile.txt 2>&1; echo "profile rc $?"; head -3 $OUT/profile.txt
timeout 70 python3 -m tuner.bench.gpu_suite --out $OUT --json-name olmoe-ram-pf.json --shape olmoe --tokens 64 --set expert_store=ram,prefetch=stale --only limit,link > $OUT/olmoe-ram-pf.txt 2>&1; echo "ram-pf rc $?"; cut -c1-700 $OUT/olmoe-ram-pf.txt | tail -3
timeout 80 python3 -m tuner ab baseline stale-prefetch --pairs 2 --tokens 128 --rules seed000 --expert-store ram > $OUT/ab-ram.txt 2>&1; echo "ab rc $?"; grep -iE 'stall|verdict|pair|arm ' $OUT/ab-ram.txt | tail -14
