#!/bin/bash
# Call 28: where a token goes when misses stream from the disk store through KvikIO
# (cProfile of 32 tokens after 32 warm, lab/profile_miss.py) on the demo model (0.6 MB
# experts, about 72 misses a token) and the OLMoE shape (12.6 MB, about 9); the demo's
# prefetch section on the tree back at one graph a layer, with its bytes ratio.
source results/2026-12-02/gpu-lib.sh
TAIL=3 step miss-demo-disk 150 python3 lab/profile_miss.py model= expert_store=disk io_reader=kvikio
TAIL=3 step miss-olmoe-disk 200 python3 lab/profile_miss.py expert_store=disk io_reader=kvikio
suite demo 100 --tokens 64 --only prefetch
