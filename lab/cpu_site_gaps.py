"""Why the CPU site's kernel takes longer inside a token than back to back: a layer of OLMoE's
routed experts through the product kernel (tuner/engine/weights/bf16_rows.py), called
  back to back, on this thread;
  with a gap of host work between calls (0.4 ms, about what a layer's other work takes
    on the H200 host), timing only the call: the kernel's threads may sleep in the gap;
  through a one-thread executor, as the sites call it, back to back and with the gap:
    the round trip to the worker thread counted;
each in this process (numba's default thread layer and its own OpenMP settings), and in a
child process with OMP_WAIT_POLICY=ACTIVE (OpenMP's threads spin between calls instead of
sleeping) and with numba's workqueue layer. Prints ms a layer for each.

    PYTHONPATH=. python3 lab/cpu_site_gaps.py [threads]
"""

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from lab.cpu_layer import D, E, I, K, Layer

GAP_S = 0.0004


def main() -> None:
    import numba

    from tuner.engine.weights import bf16_rows

    kernel = bf16_rows._kernel()
    layer = Layer()
    numba.set_num_threads(layer.threads)
    mem16, gu_n = layer.host_rows()
    xn = layer.x.numpy()
    out = np.empty((K, D), np.float32)

    def call(sel):
        kernel(mem16, np.asarray(sel, np.int64), 0, gu_n, I, xn, out)

    pool = ThreadPoolExecutor(1)
    sels = [torch.randperm(E, generator=layer.g)[:K].tolist() for _ in range(48)]

    def ms(way, gap: bool) -> float:
        spent = 0.0
        for sel in sels[:4]:
            way(sel)
        for sel in sels:
            if gap:
                end = time.perf_counter() + GAP_S
                while time.perf_counter() < end:  # host work: the GIL held, a core busy
                    pass
            t0 = time.perf_counter()
            way(sel)
            spent += time.perf_counter() - t0
        return 1000 * spent / len(sels)

    def via_pool(sel):
        pool.submit(call, sel).result()

    figures = {f"{name}{', gap' if gap else ''}": ms(way, gap)
               for name, way in (("inline", call), ("executor", via_pool))
               for gap in (False, True)}
    print(f"{os.environ.get('SETTING', 'default'):>26} ({numba.threading_layer()}): "
          + ", ".join(f"{k} {v:.3f}" for k, v in figures.items()) + " ms/layer")


if __name__ == "__main__":
    if os.environ.get("SETTING"):
        main()
    else:
        env = {**os.environ, "SETTING": "default"}
        for setting, extra in (("default", {}), ("OMP_WAIT_POLICY=ACTIVE",
                                                  {"OMP_WAIT_POLICY": "ACTIVE"}),
                               ("NUMBA_THREADING_LAYER=workqueue",
                                {"NUMBA_THREADING_LAYER": "workqueue"})):
            subprocess.run([sys.executable, __file__, *sys.argv[1:]],
                           env={**env, **extra, "SETTING": setting}, check=False)
