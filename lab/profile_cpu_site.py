"""Where a token's time goes with every miss on the CPU site (seed 002's CPU site beside a
GPU: cpu_pool, pcie_frac 0, an arena of 16 slots, the adaptive tier off) on one model:
wall ms per token after a warm-up and the engine's own spans (the layers, whole since the
sites have a step of their own, the MoE block alone before; the CPU site's compute);
cProfile's host functions by own time and the engine's by cumulative time over 8 tokens;
a timeline of a layer on the host over 24 tokens (the wait for its body, the host's work
before the site's kernel, the kernel, the work after it, the ending's launches); then the
site's compute alone, a layer's top-k at a time: the engine's own (its host copy
page-locked) between tokens, and as `tuner bench --only sites` prices it (a host copy of
its own, pageable).

    python3 lab/profile_cpu_site.py MODEL_FOLDER
"""

import cProfile
import pstats
import sys
import time

import tuner  # noqa: F401  before torch: OpenMP's spin beside a GPU (tuner/openmp.py)

# isort: split
import torch

from tuner.bench.limits import cpu_expert_gbps
from tuner.engine.step.decode import Engine
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config
from tuner.vocabulary.counters import C

ckpt = Checkpoint(sys.argv[1])
cfg = Config(cpu_pool=True, pcie_frac=0.0, expert_cache=16, adapt_every=0)
engine = Engine(ckpt, cfg, torch.device("cuda"))
print("CPU site:", engine.sites.cpu_experts.way if engine.sites else "not made")
try:
    import numba
    print("numba's thread layer:", numba.threading_layer(), numba.get_num_threads(), "threads")
except (ImportError, ValueError) as err:  # ValueError: no parallel kernel has run yet
    print("numba:", err)


def tokens(start: int, count: int) -> int:
    for pos in range(start, start + count):
        engine.step(1 + pos % 97, pos)
    torch.cuda.synchronize()
    return start + count


pos = tokens(0, 16)
engine.reset_counters()
t0 = time.perf_counter()
pos = tokens(pos, 24)
wall = 1000 * (time.perf_counter() - t0) / 24
counts = engine.counters.cur.sum(axis=0)  # no token ended: this step's counts hold them all
print(f"wall {wall:.2f} ms/token; layers {counts[C.layer_ms.index] / 24:.2f}, the CPU "
      f"site's compute {counts[C.cpu_ms.index] / 24:.2f} ms/token")
host = cProfile.Profile()
host.enable()
pos = tokens(pos, 8)
host.disable()
stats = pstats.Stats(host)
stats.sort_stats("tottime").print_stats(22)
stats.sort_stats("cumulative").print_stats("tuner", 22)


def timeline() -> None:
    """Where a layer's time goes on the host: each step's mean over 24 tokens, in us."""
    run, site = engine.device_first.bodies(), engine.sites.cpu_experts
    kernel, clock = site.kernel, time.perf_counter
    marks: list[tuple[str, int, float]] = []  # (step and > or <, layer or -1, time)

    def stamped(name, fn):
        def call(*args):
            layer = args[0] if args and isinstance(args[0], int) else -1
            marks.append((name + ">", layer, clock()))
            out = fn(*args)
            marks.append((name + "<", layer, clock()))
            return out
        return call

    names = {"run": "run", "read": "read", "finish": "finish", "finish_cpu": "finish"}
    for attr, name in names.items():
        setattr(run, attr, stamped(name, getattr(run, attr)))
    site.kernel = stamped("kernel", kernel)
    global pos
    t0 = clock()
    pos = tokens(pos, 24)
    wall = 1e6 * (clock() - t0) / 24
    for attr in names:
        delattr(run, attr)
    site.kernel = kernel
    steps = {"the body's replay": ("run>", "run<"), "the wait for the body": ("read>", "read<"),
             "after the wait, before the kernel": ("read<", "kernel>"),
             "the kernel": ("kernel>", "kernel<"),
             "after the kernel, before the ending": ("kernel<", "finish>"),
             "the ending (up, sum, residual)": ("finish>", "finish<"),
             "after the ending, before the next replay": ("finish<", "run>"),
             "after the replay, before the wait": ("run<", "read>")}
    spent = dict.fromkeys(steps, 0.0)
    for (a, la, ta), (b, lb, tb) in zip(marks, marks[1:]):
        for step, pair in steps.items():
            if (a, b) == pair and (step != "after the ending, before the next replay"
                                   or lb == la + 1):
                spent[step] += tb - ta
    layers = 24 * mc.num_layers
    print(f"timeline: wall {wall / 1000:.2f} ms/token; a layer's steps on the host, us:")
    for step, secs in spent.items():
        print(f"  {step:42s} {1e6 * secs / layers:8.1f}")
    rest = wall - 1e6 * sum(spent.values()) / 24
    print(f"  {'the rest, a token (embedding, logits, counts)':42s} {rest:8.1f}")


mc = ckpt.config
timeline()
site = engine.sites.cpu_experts
keys = [divmod(i, mc.num_experts) for i in range(0, mc.num_layers * mc.num_experts, 3)]
x = torch.randn(mc.hidden_size).to(site.dtype)
site(x, keys[:mc.top_k])
t0 = time.perf_counter()
for i in range(0, len(keys) - mc.top_k + 1, mc.top_k):
    site(x, keys[i:i + mc.top_k])
took = time.perf_counter() - t0
layer = 1000 * took / (len(keys) // mc.top_k)
print(f"the engine's site alone, between tokens (its page-locked host copy): {layer:.3f} ms "
      f"a layer's top-k, {layer * mc.num_layers:.1f} ms/token")
gbps, way = cpu_expert_gbps(ckpt, beside_gpu=True)
layer = mc.top_k * ckpt.expert_bytes / (gbps * 1e9) * 1000
print(f"a site of its own on a pageable host copy ({way}): {gbps} GB/s, {layer:.3f} ms a "
      f"layer's top-k, {layer * mc.num_layers:.1f} ms/token")
