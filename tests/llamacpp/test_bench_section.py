"""The llamacpp bench section: the -ncmoe it picks from byte counts, llama-bench's JSON
report read back (a real one, recorded from the CPU build), the skip without a build, the
GGUF written once and reused, and the section run through with a stand-in llama-bench that
answers with that report; then (opt-in: -m llamacpp) the section against the real CPU build.

llama-bench-tg.json was recorded from llama-bench b11434, CPU build, on the tiny model's
GGUF: `llama-bench -m tiny.gguf -p 0 -n 8 -r 2 -fa 0 -ngl 99 -o json -ncmoe 2`."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from tuner.bench import llamacpp as section
from tuner.bench.limits import ratio
from tuner.bench.sections import BY_NAME, Options
from tuner.engine.weights import synth
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.knobs import Config
from tuner.llamacpp.convert import cached

SAMPLE = Path(__file__).with_name("llama-bench-tg.json")
LAYER = 805_306_368  # an OLMoE layer's 64 experts of 12.6 MB in bf16


@pytest.mark.parametrize("budget, m", [
    (3 * LAYER, 13),  # exactly three layers' experts fit
    (3 * LAYER + 12_582_912, 13),  # the engine's 205 slots: a part layer does not move
    (3 * LAYER - 1, 14),  # never above the engine's bytes
    (0, 16), (LAYER - 1, 16),  # not one layer: every expert on the CPU
    (16 * LAYER, 0), (20 * LAYER, 0),  # every layer fits: nothing on the CPU
])
def test_the_layers_kept_on_the_cpu_leave_the_engines_bytes_or_fewer_on_the_gpu(budget, m):
    assert section.cpu_moe_layers([LAYER] * 16, budget) == m


def test_layers_of_different_sizes_count_from_the_last():
    sizes = [10, 40, 30, 20]  # -ncmoe M keeps layers 0..M-1 on the CPU
    assert [section.cpu_moe_layers(sizes, b) for b in (19, 20, 49, 50, 89, 90, 100)] == \
        [4, 3, 3, 2, 2, 1, 0]


def test_a_ggufs_expert_bytes_are_its_expert_tensors_per_layer(tiny_model):
    path, _ = cached(tiny_model)
    ckpt = Checkpoint(tiny_model)
    mc = ckpt.config
    assert section.expert_layer_bytes(path, mc.num_layers) == \
        [mc.num_experts * ckpt.expert_bytes] * mc.num_layers


def test_llama_benchs_json_report_is_read_into_ms_per_token():
    text = SAMPLE.read_text()
    row = json.loads(text)[0]
    r = section.parse_report(text)
    n = row["n_gen"]
    assert r["tokens"] == n == 8 and r["n_cpu_moe"] == 2 and r["n_gpu_layers"] == 99
    assert r["ms_per_token"] == pytest.approx(row["avg_ns"] / n / 1e6, abs=1e-4)
    assert r["runs_ms_per_token"] == [pytest.approx(ns / n / 1e6, abs=1e-4)
                                      for ns in row["samples_ns"]]
    assert len(r["runs_ms_per_token"]) == 2
    assert r["tokens_per_second"] == pytest.approx(row["avg_ts"], abs=1e-3)
    assert r["version"] == f"b{row['build_number']} ({row['build_commit']})"
    assert r["backends"] == "CPU" and r["n_threads"] > 0


def test_what_is_not_one_generation_report_is_refused():
    with pytest.raises(section.LlamaBenchError, match="printed no JSON report"):
        section.parse_report("error: unknown argument: -ncmoe\n")
    row = json.loads(SAMPLE.read_text())[0]
    prompt = {**row, "n_prompt": 512, "n_gen": 0}
    with pytest.raises(section.LlamaBenchError, match="2 generation tests, not one"):
        section.parse_report(json.dumps([prompt, row, row]))


def test_without_a_llama_bench_the_section_says_what_to_build(tiny_model, tmp_path,
                                                              monkeypatch):
    monkeypatch.setenv("LLAMACPP_CACHE", str(tmp_path / "no-build"))
    monkeypatch.delenv(section.BENCH_ENV, raising=False)
    cfg = Config(model=str(tiny_model), device="cpu")
    r = BY_NAME["llamacpp"].measure(cfg, Options(tokens=4))
    assert r == {"skipped": f"no llama-bench at {tmp_path}/no-build/current/build/bin/"
                            "llama-bench: run tools/llamacpp/build.sh --targets llama-bench "
                            f"(minutes), or set {section.BENCH_ENV}"}
    assert BY_NAME["llamacpp"].text(r).startswith("llamacpp: no llama-bench at ")
    assert section.find_bench(cuda=True)[1].startswith(
        f"no llama-bench at {tmp_path}/no-build/current/build-cuda/bin/llama-bench: run "
        "tools/llamacpp/build.sh --cuda --targets llama-bench")
    monkeypatch.setenv(section.BENCH_ENV, str(tmp_path / "llama-bench"))
    assert BY_NAME["llamacpp"].measure(cfg, Options(tokens=4)) == {
        "skipped": f"{section.BENCH_ENV}={tmp_path}/llama-bench is not an executable file"}


def test_the_gguf_is_written_once_and_written_again_when_the_model_changes(tiny_model,
                                                                          tuner_home):
    first, reused = cached(tiny_model)
    assert not reused and first.parent == tuner_home / "gguf"
    assert first.name.startswith(f"{tiny_model.name}-f32-")
    written = first.stat().st_mtime_ns
    again, reused = cached(tiny_model)
    assert (again, reused) == (first, True) and first.stat().st_mtime_ns == written
    cut_short = first.with_name(first.name + ".writing")
    cut_short.write_bytes(b"a write killed halfway")
    shard = Checkpoint(tiny_model).files[0]
    st = shard.stat()
    try:
        os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        changed, reused = cached(tiny_model)
    finally:
        os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert not reused and changed != first and not first.exists() and not cut_short.exists()
    assert sorted(p.name for p in (tuner_home / "gguf").iterdir()) == [changed.name]


# Stands in for llama-bench: logs its arguments and answers with the recorded report, its
# time per token 1 + M ms under -ncmoe M, so the ratios show which run each one used.
STAND_IN = """\
import json, sys
args = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
row = json.load(open({sample!r}))[0]
n = int(args[args.index("-n") + 1])
m = int(args[args.index("-ncmoe") + 1]) if "-ncmoe" in args else 0
row.update(n_gen=n, n_cpu_moe=m, avg_ns=(1 + m) * n * 10**6, samples_ns=[(1 + m) * n * 10**6])
print(json.dumps([row], indent=2))
"""


def test_the_section_runs_llama_bench_at_the_engines_budget_for_each_store(
        tiny_model, tmp_path, monkeypatch):
    log = tmp_path / "args.jsonl"
    script = tmp_path / "llama-bench"
    script.write_text(f"#!{sys.executable}\n" + STAND_IN.format(log=str(log),
                                                                 sample=str(SAMPLE)))
    script.chmod(0o755)
    monkeypatch.setenv(section.BENCH_ENV, str(script))
    # 24 of the tiny model's 4 x 16 experts: one layer's and a half
    cfg = Config(model=str(tiny_model), device="cpu", expert_cache=24, io_workers=2,
                 io_urgent=1)
    r = BY_NAME["llamacpp"].measure(cfg, Options(tokens=4))
    layer = 16 * Checkpoint(tiny_model).expert_bytes
    assert r["layers"] == 4 and r["expert_layer_bytes"] == [layer] * 4
    assert r["gguf"]["reused"] is False and r["llama_cpp"].startswith("b")
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [shlex.split(c) for c in r["commands"]] == [[str(script), *a] for a in calls]
    for args in calls:
        assert args[args.index("-m") + 1] == r["gguf"]["path"]
        assert " ".join(args).startswith("-m ") and \
            "-p 0 -n 4 -r 3 -fa 0 -ngl 99 -o json" in " ".join(args)
    ncmoe = [int(a[a.index("-ncmoe") + 1]) if "-ncmoe" in a else None for a in calls]
    assert ncmoe[0] is None and ncmoe[-1] == 4  # fully resident first, every expert on the CPU last
    for store in ("ram", "disk"):
        s = r["stores"][store]
        budget, m = s["engine_expert_bytes"], s["cpu_moe"]
        assert budget >= 24 * Checkpoint(tiny_model).expert_bytes
        assert s["llama_gpu_expert_bytes"] == (4 - m) * layer <= budget < (5 - m) * layer
        assert m in ncmoe and s["llama_ms_per_token"] == 1 + m
        assert r["offload_ratio"][store] == s["offload_ratio"] == \
            ratio(1 + m, s["engine_ms_per_token"])
        assert len(s["engine_runs"]) == 3
        # the bracket above: one layer's experts more on the GPU, at or above the budget
        above = s["above"]
        assert above["cpu_moe"] == m - 1 and m - 1 in ncmoe
        assert above["llama_gpu_expert_bytes"] == (5 - m) * layer > budget
        assert above["offload_ratio"] == ratio(m, s["engine_ms_per_token"])
    assert len(ncmoe) == len(set(ncmoe))  # a placement runs once, whichever store needs it
    res = r["resident"]
    assert res["llama_ms_per_token"] == 1 and r["resident_ratio"] == ratio(
        res["engine_ms_per_token"], 1)
    assert r["all_cpu"] == {"cpu_moe": 4, "llama_ms_per_token": 5}
    line = BY_NAME["llamacpp"].text(r)
    assert line.startswith("llamacpp (cpu, llama.cpp b") and "-ncmoe 4" in line
    assert f"(-ncmoe {r['stores']['ram']['above']['cpu_moe']}, " in line


@pytest.mark.llamacpp
@pytest.mark.timeout(900)
def test_the_section_against_the_cpu_build(tiny_model, llama_bench, monkeypatch):
    """llama.cpp's CPU build and the engine on the CPU, the tiny model: every run reports,
    and llama-bench ran each placement it was given."""
    monkeypatch.setenv(section.BENCH_ENV, str(llama_bench))
    cfg = Config(model=str(tiny_model), device="cpu", expert_cache=24, io_workers=2,
                 io_urgent=1)
    r = BY_NAME["llamacpp"].measure(cfg, Options(tokens=8))
    assert r["resident_ratio"] > 0 and all(v > 0 for v in r["offload_ratio"].values())
    for run in r["llama_runs"].values():
        assert run["tokens"] == 8 and len(run["runs_ms_per_token"]) == 3
        assert run["backends"] == "CPU" and run["ms_per_token"] > 0
        assert f"-ncmoe {run['n_cpu_moe']}" in run["command"] or run["n_cpu_moe"] == 0
    assert r["all_cpu"]["cpu_moe"] == synth.TINY.num_layers
    print(BY_NAME["llamacpp"].text(r))
