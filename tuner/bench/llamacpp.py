"""llama.cpp beside the engine on the same model and machine.

llama-bench's token generation (`-p 0 -n N -r R -fa 0 -ngl 99 -o json`) on the model's GGUF
(written once into tuner's cache by tuner.llamacpp.convert), three ways: every weight on the GPU;
`-ncmoe M` for each expert store, the experts of the first M layers kept and computed on
the CPU, M chosen so that the experts left on the GPU take the bytes the engine's arena
holds there with that store (Arena.device_bytes: slots, bypass rows, landing sets), the
closest to them and not above; and `-ncmoe L`, every expert on the CPU, to stand beside the
engine's CPU site (the sites section). The engine on the same model: its fully resident
path over N random token ids, as llama-bench's generation test feeds them, and its
streaming at the current settings with the RAM store and the disk store, a session decoding
text as `tuner run` does. Each side runs R times after a warm-up: llama-bench's is one
token, the engine's N tokens (which fill its arena, as a session's first tokens do).

The llama-bench run is the one TUNER_LLAMA_BENCH names, else the cache's current build
(tools/llamacpp/build.sh --cuda --targets llama-bench where the engine runs on a GPU; without
--cuda on a machine without one, where every buffer is host memory and -ncmoe moves nothing).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import statistics
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import torch

from tuner import llamacpp
from tuner.bench.limits import ratio, time_steps
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.session.opening import model_folder, pick_device, use_threads
from tuner.engine.session.session import Session
from tuner.engine.step.reference import Resident
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.errors import TunerError

BENCH_ENV = "TUNER_LLAMA_BENCH"
REPS = 3  # llama-bench's -r, and the engine's timed runs
STORES = ("ram", "disk")
RUN_S = 1800  # one llama-bench call: loading a 13 GB GGUF, then 1 + REPS runs
EXPERT_TENSOR = re.compile(rf"blk\.(\d+)\.{llamacpp.EXPS}\.")


class LlamaBenchError(TunerError, RuntimeError):
    """llama-bench failed or printed what is not its JSON report; the message says which."""


def find_bench(cuda: bool) -> tuple[Path | None, str]:
    """(llama-bench, "") or (None, why there is none to run)."""
    named = os.environ.get(BENCH_ENV)
    if named:
        path = Path(named)
        if path.is_file() and os.access(path, os.X_OK):
            return path, ""
        return None, f"{BENCH_ENV}={named} is not an executable file"
    path = llamacpp.program("llama-bench", cuda)
    if path.is_file():
        return path, ""
    build = f"{llamacpp.BUILD}{' --cuda' if cuda else ''} --targets llama-bench"
    return None, f"no llama-bench at {path}: run {build} (minutes), or set {BENCH_ENV}"


def expert_layer_bytes(gguf_path: Path, layers: int) -> list[int]:
    """Bytes of each layer's expert tensors in the GGUF: what `-ncmoe` moves a layer at a
    time (the tensors llama.cpp's LLM_FFN_EXPS_REGEX matches; a shared expert stays)."""
    import gguf

    out = [0] * layers
    for t in gguf.GGUFReader(gguf_path).tensors:
        m = EXPERT_TENSOR.match(t.name)
        if m:
            out[int(m.group(1))] += int(t.n_bytes)
    return out


def cpu_moe_layers(layer_bytes: list[int], budget: int) -> int:
    """The M of `-ncmoe M` (the first M layers' experts on the CPU) whose experts left on
    the GPU come closest to `budget` bytes without going over it."""
    return next(m for m in range(len(layer_bytes) + 1) if sum(layer_bytes[m:]) <= budget)


def parse_report(stdout: str) -> dict:
    """llama-bench's `-o json` report of one generation test (-p 0 -n N): ms per token from
    its mean time, each repetition's, and what says which llama.cpp ran where."""
    try:
        rows = json.loads(stdout)
    except ValueError as err:
        raise LlamaBenchError(f"llama-bench printed no JSON report ({err}): "
                              f"{stdout.strip()[:200]!r}") from None
    tests = [r for r in rows if r.get("n_prompt") == 0 and r.get("n_gen", 0) > 0]
    if len(tests) != 1:
        raise LlamaBenchError(f"llama-bench reported {len(tests)} generation tests, not one "
                              "(run it with -p 0 and one -n)")
    r = tests[0]
    n = r["n_gen"]
    return {"ms_per_token": round(r["avg_ns"] / n / 1e6, 4),
            "runs_ms_per_token": [round(ns / n / 1e6, 4) for ns in r["samples_ns"]],
            "stddev_ms_per_token": round(r["stddev_ns"] / n / 1e6, 4),
            "tokens_per_second": round(r["avg_ts"], 3), "tokens": n,
            "n_cpu_moe": r.get("n_cpu_moe", 0), "n_gpu_layers": r["n_gpu_layers"],
            "n_threads": r["n_threads"], "flash_attn": r["flash_attn"],
            "backends": r["backends"], "gpu_info": r["gpu_info"], "cpu_info": r["cpu_info"],
            "model_size": r["model_size"], "model_type": r["model_type"],
            "version": f"b{r['build_number']} ({r['build_commit']})"}


def llama_bench(binary: Path, gguf_path: Path, tokens: int, reps: int,
                cpu_moe: int | None) -> dict:
    cmd = [str(binary), "-m", str(gguf_path), "-p", "0", "-n", str(tokens), "-r", str(reps),
           "-fa", "0", "-ngl", "99", "-o", "json"]
    if cpu_moe is not None:
        cmd += ["-ncmoe", str(cpu_moe)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise LlamaBenchError(f"llama-bench ran past {RUN_S} s: {shlex.join(cmd)}") from None
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise LlamaBenchError(f"llama-bench exited with {done.returncode}: {last} "
                              f"({shlex.join(cmd)})")
    return {"command": shlex.join(cmd), **parse_report(done.stdout)}


def resident_ms(ckpt: Checkpoint, cfg: Config, device: torch.device, tokens: int,
                reps: int) -> list[float]:
    """The engine's fully resident path: ms per token of each of `reps` runs over the same
    random ids from position 0, after one run to warm it; with the engine's threads."""
    use_threads(cfg.threads)
    ids = torch.randint(ckpt.config.vocab_size, (tokens,),
                        generator=torch.Generator().manual_seed(0)).tolist()
    resident = Resident(ckpt, max(cfg.context, tokens), device)  # positions 0..tokens-1
    time_steps(resident.step, ids)
    return [time_steps(resident.step, ids) for _ in range(reps)]


def streaming(cfg: Config, tokens: int, reps: int) -> dict:
    """The engine at `cfg`: a session decoding `tokens` tokens to warm its arena, then
    `reps` runs of `tokens`, each from counters reset; with its fast-memory expert bytes."""
    session = Session(cfg)
    try:
        budget = session.engine.arena.device_bytes
        session.run(tokens)
        runs, hits = [], []
        for _ in range(reps):
            session.reset_counters()
            session.run(tokens)
            t = session.snapshot()["totals"]
            runs.append(t["ms_per_token"])
            hits.append(t["hit_rate"])
    finally:
        session.engine.close()
    return {"engine_ms_per_token": round(statistics.mean(runs), 4), "engine_runs": runs,
            "hit_rate": round(statistics.mean(hits), 2), "engine_expert_bytes": budget}


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    device = pick_device(cfg.device)
    binary, why = find_bench(device.type == "cuda")
    if binary is None:
        return {"skipped": why}
    try:
        from tuner.llamacpp.convert import cached
    except ModuleNotFoundError as err:
        return {"skipped": f"{err.name} is missing: the GGUF is written with the gguf "
                           "package (pip install 'tuner[gguf]')"}
    ckpt = Checkpoint(model_folder(cfg))
    L = ckpt.config.num_layers
    t0 = time.perf_counter()
    gguf_path, reused = cached(ckpt.folder)
    gguf_s = round(time.perf_counter() - t0, 1)
    layer_bytes = expert_layer_bytes(gguf_path, L)

    res_runs = resident_ms(ckpt, cfg, device, tokens, REPS)
    stores = {s: streaming(replace(cfg, expert_store=s), tokens, REPS) for s in STORES}
    if device.type == "cuda":
        torch.cuda.empty_cache()  # llama-bench needs the memory next

    runs: dict[str, dict] = {}

    def llama_ms(cpu_moe: int | None) -> float:
        """llama-bench with `-ncmoe cpu_moe` (None: not given), run once per placement."""
        key = "resident" if cpu_moe is None else f"ncmoe_{cpu_moe}"
        if key not in runs:
            runs[key] = llama_bench(binary, gguf_path, tokens, REPS, cpu_moe)
        return runs[key]["ms_per_token"]

    llama_res = llama_ms(None)
    for r in stores.values():
        m = cpu_moe_layers(layer_bytes, r["engine_expert_bytes"])
        r.update(cpu_moe=m, llama_gpu_expert_bytes=sum(layer_bytes[m:]),
                 llama_ms_per_token=llama_ms(m),
                 offload_ratio=ratio(llama_ms(m), r["engine_ms_per_token"]))
        if m > 0:  # whole layers rarely match the budget: llama.cpp also with one layer's
            # experts more on the GPU, at or above the engine's bytes, brackets the ratio
            r["above"] = {"cpu_moe": m - 1,
                          "llama_gpu_expert_bytes": sum(layer_bytes[m - 1:]),
                          "llama_ms_per_token": llama_ms(m - 1),
                          "offload_ratio": ratio(llama_ms(m - 1), r["engine_ms_per_token"])}
    all_cpu = llama_ms(L)
    engine_res = round(statistics.mean(res_runs), 4)
    return {"tokens": tokens, "reps": REPS, "device": str(device),
            "llama_cpp": runs["resident"]["version"], "llama_bench": str(binary),
            "gguf": {"path": str(gguf_path), "bytes": gguf_path.stat().st_size,
                     "reused": reused, "seconds": gguf_s},
            "layers": L, "expert_layer_bytes": layer_bytes,
            "resident_ratio": ratio(engine_res, llama_res),
            "offload_ratio": {s: r["offload_ratio"] for s, r in stores.items()},
            "resident": {"engine_ms_per_token": engine_res,
                         "engine_runs": [round(x, 4) for x in res_runs],
                         "llama_ms_per_token": llama_res},
            "stores": stores,
            "all_cpu": {"cpu_moe": L, "llama_ms_per_token": all_cpu},
            "llama_runs": runs,
            "commands": [r["command"] for r in runs.values()]}


def text(r: dict) -> str:
    stores = "; ".join(
        f"{s} store {v['engine_ms_per_token']} ms/token at {v['engine_expert_bytes']} expert "
        f"bytes vs -ncmoe {v['cpu_moe']} ({v['llama_gpu_expert_bytes']} bytes) "
        f"{v['llama_ms_per_token']}: {v['offload_ratio']}x" + (
            f" (-ncmoe {v['above']['cpu_moe']}, {v['above']['llama_gpu_expert_bytes']} "
            f"bytes: {v['above']['offload_ratio']}x)" if "above" in v else "")
        for s, v in r["stores"].items())
    res = r["resident"]
    return (f"llamacpp ({r['device']}, llama.cpp {r['llama_cpp']}): fully resident engine "
            f"{res['engine_ms_per_token']} / llama.cpp {res['llama_ms_per_token']} ms/token = "
            f"{r['resident_ratio']}; {stores}; every expert on the CPU (-ncmoe "
            f"{r['all_cpu']['cpu_moe']}) {r['all_cpu']['llama_ms_per_token']} ms/token")
