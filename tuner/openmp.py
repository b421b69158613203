"""OpenMP's threads kept spinning through a token beside a GPU, set before torch loads.

The CPU site's kernel (engine/weights/bf16_rows.py) runs two OpenMP parallel regions a
layer, a few tenths of a millisecond apart while the GPU attends and routes. Spinning
threads start each region at once: alone, a layer's kernel took 1.06 ms with
OMP_WAIT_POLICY=ACTIVE against 1.26 with libgomp's default wait (results/2026-12-04, call
65). In the engine, with every miss on the CPU site, four interleaved runs on one H200 host
gave a median 20.9 ms/token with a spin of 3e7 (about 0.3 s by libgomp's estimate of 1e5
spins a millisecond), 20.5 spinning for good (ACTIVE) and 24.4 with the default (call 69);
on a slower host two runs each gave no difference (call 71). llama.cpp's own thread pool
spins likewise while a token runs. A finite spin lets the threads sleep once the engine
idles, where ACTIVE would keep every core busy for minutes.

libgomp reads its settings once, when it loads (with torch), so this runs when the package
is imported, and only where an NVIDIA GPU is present: on a machine of CPUs alone the
engine keeps libgomp's default. A setting of the user's (OMP_WAIT_POLICY or GOMP_SPINCOUNT)
is left as it is (OMP_WAIT_POLICY=PASSIVE, say, has them sleep at once)."""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

SPINS = "30000000"
NVIDIA = Path("/dev/nvidiactl")  # the NVIDIA driver's control device, on Linux


def keep_threads_warm(environ: MutableMapping[str, str] = os.environ,
                      gpu: Path = NVIDIA) -> bool:
    """Sets GOMP_SPINCOUNT where a GPU is present and the user set no wait of their own;
    whether it did."""
    if "OMP_WAIT_POLICY" in environ or "GOMP_SPINCOUNT" in environ or not gpu.exists():
        return False
    environ["GOMP_SPINCOUNT"] = SPINS
    return True
