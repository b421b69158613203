"""The expert kernels' tiles (`fused.GATE_UP`, `fused.DOWN`) swept on a GPU: a token's 16
layers of `fused.mix` captured as one CUDA graph, each layer on k experts of its own (as a
token reads them), at OLMoE's expert shape and the demo's. Prints, per tile, microseconds a
layer and the expert bytes' rate, beside a device-to-device copy of the same bytes (what
the memory can do); one JSON line per shape at the end with the fastest tiles.

    python3 lab/expert_tiles.py
"""

import itertools
import json

import torch

from tuner.engine.weights import fused
from tuner.engine.weights.checkpoint import Layout, Part

SHAPES = {"olmoe": (2048, 1024, 8), "demo": (256, 384, 6)}  # D, I, k
LAYERS, DT = 16, torch.bfloat16
dev = torch.device("cuda")


def layout_of(D: int, I: int) -> Layout:
    gate = Part("gate", 0, (I, D), DT)
    up = Part("up", gate.nbytes, (I, D), DT)
    down = Part("down", 2 * gate.nbytes, (D, I), DT)
    return Layout((gate, up, down), 3 * gate.nbytes)


def graph_ms(fn, reps: int = 50) -> float:
    """ms a replay of `fn` captured as a CUDA graph, on device events (median of 5)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    runs = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            graph.replay()
        end.record()
        end.synchronize()
        runs.append(start.elapsed_time(end) / reps)
    return sorted(runs)[2]


def sweep(name: str, D: int, I: int, k: int) -> dict:
    layout = layout_of(D, I)
    rows_n = LAYERS * k
    g = torch.Generator().manual_seed(0)
    mem = (torch.randn(rows_n, layout.row_bytes // 2, generator=g) * 0.02).to(DT).view(
        torch.uint8).to(dev)
    x = torch.randn(D, generator=g).to(DT).to(dev)
    w = torch.softmax(torch.randn(k, generator=g), 0).to(dev)
    rows = [torch.arange(l * k, (l + 1) * k, device=dev) for l in range(LAYERS)]
    token_bytes = rows_n * layout.row_bytes
    copy_dst = torch.empty_like(mem)
    copy_ms = graph_ms(lambda: copy_dst.copy_(mem))  # reads and writes: 2x the bytes
    hbm_gbps = 2 * token_bytes / copy_ms / 1e6

    def token():
        for r in rows:
            fused.mix(mem, r, layout, x, w)

    base = fused.GATE_UP, fused.DOWN
    print(f"\n{name}: D {D} I {I} k {k}, {layout.row_bytes / 1e6:.2f} MB an expert; "
          f"device copy {hbm_gbps:.0f} GB/s, {token_bytes / hbm_gbps / 1e3 / LAYERS:.1f} us "
          "a layer at that rate")
    results = {}
    for which in ("GATE_UP", "DOWN"):
        best = None
        for n, kk, warps in itertools.product((4, 8, 16, 32), (256, 512, 1024), (2, 4, 8)):
            if n * kk > 16384:
                continue
            tile = fused.Tile(n, kk, warps)
            fused.GATE_UP, fused.DOWN = base
            setattr(fused, which, tile)
            ms = graph_ms(token)
            us = ms * 1e3 / LAYERS
            if best is None or us < best[0]:
                best = (us, tile)
            print(f"  {which:7} n {n:3} k {kk:5} warps {warps}: {us:7.2f} us a layer "
                  f"(all else at its default)")
        results[which] = best
    fused.GATE_UP, fused.DOWN = results["GATE_UP"][1], results["DOWN"][1]
    both_us = graph_ms(token) * 1e3 / LAYERS
    fused.GATE_UP, fused.DOWN = base
    base_us = graph_ms(token) * 1e3 / LAYERS
    floor_us = token_bytes / hbm_gbps / 1e3 / LAYERS
    out = {"shape": name, "hbm_gbps": round(hbm_gbps), "floor_us_per_layer": round(floor_us, 2),
           "default_us_per_layer": round(base_us, 2), "best_us_per_layer": round(both_us, 2),
           "best_gate_up": vars(results["GATE_UP"][1]), "best_down": vars(results["DOWN"][1]),
           "best_over_floor": round(both_us / floor_us, 2)}
    print(json.dumps(out))
    return out


for name, shape in SHAPES.items():
    sweep(name, *shape)
