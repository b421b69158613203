"""The benchmark suite of a GPU machine in one call, written as JSON.

    python -m tuner.measure.gpu_suite --out results/DATE [--model PATH]

Needs only torch, numpy and safetensors (the engine's own dependencies; peer also needs
transformers and accelerate), so it runs on a machine that has a CUDA build of torch and
nothing of the UI stack. Sections:

* greedy: the demo model, float32 and bfloat16, decoded greedily on the CPU and on CUDA,
  bonus 0: the same tokens, and the largest logit difference while the inputs agree;
* resident: streaming logits on CUDA against the fully resident model on CUDA, float32 and
  bfloat16 (bit-identical is the claim);
* read, machinery, link, limit, peer, sites: `tuner bench`'s sections on `--model` (the
  bfloat16 demo model by default).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import replace
from pathlib import Path

import torch

from tuner.engine import synth
from tuner.engine.checkpoint import Checkpoint
from tuner.engine.decode import Engine
from tuner.engine.reference import Resident
from tuner.knobs import BY_NAME, Config
from tuner.measure import bench

PROMPT = [101, 7, 2048, 33, 999, 12, 640, 5]


def greedy(engine_or_model, steps: int) -> tuple[list[int], torch.Tensor]:
    ids, rows = list(PROMPT), []
    for pos in range(len(PROMPT) + steps - 1):
        logits = engine_or_model.step(ids[pos], pos).float().cpu()
        rows.append(logits)
        if pos >= len(PROMPT) - 1:
            ids.append(int(torch.argmax(logits)))
    return ids, torch.stack(rows)


DEMO_DTYPES = ("fp32", "bf16")


def _demo(dtype: str) -> Checkpoint:
    return Checkpoint(synth.ensure(replace(synth.DEFAULT, dtype=dtype)))


def compare_devices(cfg: Config, steps: int, ckpt: Checkpoint) -> dict:
    """CPU against CUDA through the streaming path; logits are compared while both sides
    have had the same inputs."""
    runs = {}
    for name in ("cpu", "cuda"):
        engine = Engine(ckpt, replace(cfg, device=name), torch.device(name))
        try:
            runs[name] = greedy(engine, steps)
        finally:
            engine.close()
    (cpu_ids, cpu_logits), (gpu_ids, gpu_logits) = runs["cpu"], runs["cuda"]
    agree = next((i for i, (a, b) in enumerate(zip(cpu_ids, gpu_ids)) if a != b), None)
    upto = len(cpu_logits) if agree is None else agree  # rows whose inputs still agree
    diff = (cpu_logits[:upto] - gpu_logits[:upto]).abs().max().item()
    return {"steps": steps, "same_tokens": cpu_ids == gpu_ids, "first_difference": agree,
            "max_logit_difference": diff, "positions_compared": upto}


def streaming_vs_resident(cfg: Config, steps: int, ckpt: Checkpoint) -> dict:
    device = torch.device("cuda")
    engine = Engine(ckpt, replace(cfg, device="cuda", prefetch="stale"), device)
    try:
        ids, streamed = greedy(engine, steps)
    finally:
        engine.close()
    resident = Resident(ckpt, cfg.context, device)
    rids, full = greedy(resident, steps)
    return {"same_tokens": ids == rids,
            "bit_identical_logits": bool(torch.equal(streamed, full)),
            "max_logit_difference": (streamed - full).abs().max().item()}


def knob_values(text: str) -> dict:
    """`a=1,b=x` as knob values of the knob table's types (no settings library here)."""
    out = {}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        knob = BY_NAME.get(name.strip())
        if knob is None:
            raise SystemExit(f"gpu_suite: --set {name!r} is not a knob")
        kind = knob.type
        out[knob.name] = value.strip() in ("1", "true") if kind is bool else kind(value)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder for gpu-suite.json")
    p.add_argument("--model", type=Path, help="model of the bench sections (default: the "
                                             "bfloat16 demo model)")
    p.add_argument("--shape", choices=tuple(synth.SHAPES),
                   help="instead of --model: a real-shape model, made into the model cache")
    p.add_argument("--layers", type=int, help="with --shape: its first N layers")
    p.add_argument("--set", default="", metavar="KNOB=VALUE,...",
                   help="knob values of the bench sections (e.g. io_piece_kib=2048)")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--peer-tokens", type=int, default=8,
                   help="tokens of transformers with accelerate offload (slow)")
    p.add_argument("--only", default="greedy,resident,read,machinery,link,limit,peer,sites")
    p.add_argument("--json-name", default="gpu-suite.json")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_suite: torch sees no CUDA device")
    sections = args.only.split(",")
    t0 = time.perf_counter()
    if args.shape:
        model = str(synth.ensure(synth.shape(args.shape, args.layers)))
    else:
        model = str(args.model or synth.ensure())
    made_s = round(time.perf_counter() - t0, 1)
    cfg = Config(model=model, **knob_values(args.set))  # sampled text, as a session decodes
    greedy_cfg = Config(temperature=0.0)
    out: dict = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "machine": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                             "cuda": torch.version.cuda, "python": platform.python_version(),
                             "cpus": __import__("os").cpu_count()},
                 "engine": bench.describe(cfg), "model_ready_seconds": made_s,
                 "settings": knob_values(args.set)}
    steps = {"greedy": lambda: {d: compare_devices(greedy_cfg, 64, _demo(d))
                                for d in DEMO_DTYPES},
             "resident": lambda: {d: streaming_vs_resident(greedy_cfg, 64, _demo(d))
                                  for d in DEMO_DTYPES},
             "read": lambda: bench.read_bandwidth(cfg, args.tokens),
             "machinery": lambda: bench.machinery(cfg, args.tokens),
             "link": lambda: bench.link_bandwidth(cfg, args.tokens),
             "limit": lambda: bench.limit(cfg, args.tokens),
             "peer": lambda: bench.peer(cfg, min(args.tokens, 64), args.peer_tokens),
             "sites": lambda: bench.sites_sweep(cfg, [0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0],
                                                args.tokens, 1.0)}
    args.out.mkdir(parents=True, exist_ok=True)
    for name in sections:
        t0 = time.perf_counter()
        try:
            out[name] = steps[name]()
        except Exception as err:  # one broken section must not lose the others' figures
            out[name] = {"error": f"{type(err).__name__}: {err}"}
        out[name]["seconds"] = round(time.perf_counter() - t0, 1)
        (args.out / args.json_name).write_text(json.dumps(out, indent=1))
        print(name, json.dumps(out[name])[:600], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
