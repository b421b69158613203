"""The benchmark suite of a GPU machine in one call, written as JSON.

    python -m tuner.bench.gpu_suite --out results/DATE [--model PATH]

Needs only torch, numpy and safetensors (the engine's own dependencies; peer also needs
transformers and accelerate, llamacpp the gguf package and a llama-bench build), so it runs
on a machine that has a CUDA build of torch and nothing of the UI stack. Its sections are
`tuner bench`'s (tuner.bench.sections; by default those marked for the GPU suite: greedy,
resident, read, machinery, link, limit, peer, llamacpp, sites) on `--model` (the bfloat16
demo model by default).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from tuner.bench.limits import describe
from tuner.bench.sections import GPU, Options, chosen
from tuner.engine.weights import synth
from tuner.errors import CommandError, Exit, run
from tuner.knobs import BY_NAME, Config

SITES_FRACS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)  # the sweep at real link and CPU speed
PEER_TOKENS = 64  # at most, of the peer section: transformers decodes slowly
SWITCH = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}


def knob_values(text: str) -> dict:
    """`a=1,b=x` as knob values of the knob table's types (no settings library here)."""
    out = {}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        knob = BY_NAME.get(name.strip())
        if knob is None:
            raise CommandError(f"--set {name!r} is not a knob")
        if knob.type is tuple:  # its numbers' commas would split the list of knobs
            raise CommandError(f"--set {knob.name}: a list of numbers cannot be given here; "
                               "allowed: switches, numbers and text")
        word = value.strip().lower()
        try:
            out[knob.name] = SWITCH[word] if knob.type is bool else knob.type(value.strip())
        except (KeyError, ValueError):
            raise CommandError(f"--set {knob.name}={value!r}: allowed "
                             f"{knob.allowed()}") from None
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
    p.add_argument("--peer-tokens", type=int, default=Options().offload_tokens,
                   help="tokens of transformers with accelerate offload (slow)")
    p.add_argument("--only", default=",".join(GPU))
    p.add_argument("--json-name", default="gpu-suite.json")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise CommandError("torch sees no CUDA device", Exit.UNAVAILABLE)
    sections = chosen(args.only.split(","))
    t0 = time.perf_counter()
    if args.shape:
        model = str(synth.ensure(synth.shape(args.shape, args.layers)))
    else:
        model = str(args.model or synth.ensure())
    made_s = round(time.perf_counter() - t0, 1)
    cfg = Config(model=model, **knob_values(args.set))  # sampled text, as a session decodes
    opts = Options(tokens=args.tokens, fracs=SITES_FRACS, scale=1.0,
                   offload_tokens=args.peer_tokens)
    out: dict = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "machine": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                             "cuda": torch.version.cuda, "python": platform.python_version(),
                             "cpus": os.cpu_count()},
                 "engine": describe(cfg), "model_ready_seconds": made_s,
                 "settings": knob_values(args.set)}
    args.out.mkdir(parents=True, exist_ok=True)
    for section in sections:
        t0 = time.perf_counter()
        run = replace(opts, tokens=min(args.tokens, PEER_TOKENS)) if section.name == "peer" \
            else opts
        try:
            out[section.name] = section.measure(cfg, run)
        except Exception as err:  # one broken section must not lose the others' figures
            out[section.name] = {"error": f"{type(err).__name__}: {err}"}
        out[section.name]["seconds"] = round(time.perf_counter() - t0, 1)
        (args.out / args.json_name).write_text(json.dumps(out, indent=1))
        print(section.name, json.dumps(out[section.name])[:600], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run("gpu_suite", main))
