"""Scratch: the throwaway `snapshot` section runs from `tuner bench --only`, and the GPU
suite's choice and the lists of sections name it."""
import io
import json
from contextlib import redirect_stdout

from tuner.bench.sections import chosen, markdown
from tuner.cli import main

FLAGS = ["--tokens", "8", "--expert-cache", "16", "--io-workers", "2", "--io-urgent", "1",
         "--device", "cpu"]


def bench(*args):
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["bench", *args]) == 0
    return out.getvalue()


def test_bench_only_runs_it(tiny_model):
    r = json.loads(bench("--only", "snapshot", "--json", "--model", str(tiny_model), *FLAGS))
    snap = r["snapshot"]
    assert snap["snapshot_ms"] > 0 and snap["ms_per_token"] > 0 and snap["tokens"] == 8
    line = bench("--only", "snapshot", "--model", str(tiny_model), *FLAGS)
    assert "snapshot: one snapshot" in line
    assert [s.name for s in chosen(["snapshot"])] == ["snapshot"]  # what gpu_suite --only reads
    assert "`snapshot`" in markdown() and "`snapshot`" in bench("--list")
