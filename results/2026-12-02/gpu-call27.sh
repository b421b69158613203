#!/bin/bash
# Call 27: the prefetch section with the read-ahead capped at the 4 best-ranked predicted
# misses a layer (prefetch_max = 4 of top-8): fewer unused reads over the link.
source results/2026-12-02/gpu-lib.sh
suite olmoe-max4 170 --tokens 32 --only prefetch --shape olmoe --set prefetch_max=4
