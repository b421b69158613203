"""Every file a user names on the command line: a device, a fifo or a folder is refused
before anything is read, what is read is bounded, and whatever the file holds the command
ends with one line naming it and what is allowed, never a traceback, a hang or a process
that grows first."""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy

from tuner.cli import main
from tuner.engine.session.opening import encode
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.traces import importers
from tuner.traces.importers import ImportFailed, import_trace
from tuner.vocabulary import inputs, trace_format
from tuner.vocabulary.model_config import ModelError
from tuner.vocabulary.trace_format import Trace, TraceError
from tuner.vocabulary.workload import WorkloadError, read_file

ROOT = Path(__file__).resolve().parents[2]
ROW = '{"layer": 0, "token_idx": 0, "experts": [%s]}\n'
CSV_HEAD = "layer,token,experts\n"


def one_line(capsys, argv: list[str], status: int = 2) -> str:
    """The error `tuner argv` ends with; it must be its only line on stderr."""
    assert main(argv) == status
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def fifo(tmp_path: Path) -> str:
    path = tmp_path / "pipe.jsonl"
    os.mkfifo(path)  # opening it for reading would wait for a writer forever
    return str(path)


@pytest.mark.parametrize("src, says", [
    (lambda tmp: "/dev/zero", "'/dev/zero': a device, not a regular file; a route log is"),
    (fifo, "pipe.jsonl': a fifo, not a regular file"),
    (lambda tmp: str((tmp / "d.jsonl").mkdir() or tmp), "d.jsonl': a folder, not a regular"),
])
def test_a_route_log_that_is_not_a_regular_file_is_refused_unread(tmp_path, capsys, src,
                                                                 says):
    err = one_line(capsys, ["trace", "import", "jsonl", src(tmp_path), "-o",
                            str(tmp_path / "t.npz")])
    assert says in err


def test_presets_import_reads_no_device(capsys):
    err = one_line(capsys, ["presets", "import", "/dev/zero", "--name", "z"])
    assert "a device, not a regular file; an env file is a regular file of at most 64 KiB" \
        in err


@pytest.mark.parametrize("fmt, name, text, report", [
    ("jsonl", "deep.jsonl", "[" * 100_000 + "\n", "not JSON (arrays or objects nested too "
                                                 "deeply)"),
    ("jsonl", "digits.jsonl", ROW % ("9" * 5000), "not JSON (Exceeds the limit (4300 digits)"),
    ("jsonl", "weights.jsonl", '{"layer": 0, "token_idx": 0, "experts": [1], "probs": [%s]}\n'
     % ("9" * 400), "int too large to convert to float"),
    ("jsonl", "bytes.jsonl", b"\xff\xfe\x00garbage\n", "not JSON (not UTF-8)"),
    ("vllm", "moe_layer0.jsonl", b"\x80" * 64 + b"\n", "not JSON (not UTF-8)"),
])
def test_unreadable_rows_are_reported_and_the_import_fails_in_one_line(tmp_path, capsys, fmt,
                                                                      name, text, report):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert main(["trace", "import", fmt, str(path), "-o", str(tmp_path / "t.npz")]) == 2
    out, err = capsys.readouterr()
    assert report in out and err.count("\n") == 1, (out, err)
    assert err.startswith("tuner trace import: ")


@pytest.mark.parametrize("fmt, name, text", [
    ("jsonl", "big.jsonl", ROW % f"{2**40}, 1"),  # an id beyond int32
    ("csv", "big.csv", CSV_HEAD + f"0,0,{2**70}\n0,1,3\n"),  # beyond a C long
])
def test_ids_past_what_a_trace_holds_are_reported_out_of_range(tmp_path, capsys, fmt, name,
                                                               text):
    path = tmp_path / name
    path.write_text(text)
    assert main(["trace", "import", fmt, str(path), "-o", str(tmp_path / "t.npz")]) == 0
    assert "out_of_range: 1" in capsys.readouterr().out


@pytest.mark.parametrize("field, says", [
    (200_000, "big.csv:2: not a CSV row (field larger than field limit (131072)); a field "
              "holds at most 131,072 characters"),
    (2 << 20, "big.csv': line 2 is longer than 1 MiB; a route log is a regular file of at "
              "most 512 MiB, each line at most 1 MiB"),
])
def test_a_csv_field_or_line_over_its_limit_is_one_line(tmp_path, capsys, field, says):
    path = tmp_path / "big.csv"
    path.write_text(CSV_HEAD + "0,0," + "1" * field + "\n")
    assert says in one_line(capsys, ["trace", "import", "csv", str(path), "-o",
                                     str(tmp_path / "t.npz")])


def test_an_import_reads_at_most_its_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(importers, "MAX_LINES", 10)
    path = tmp_path / "log.jsonl"
    path.write_text("".join(ROW.replace('"token_idx": 0', f'"token_idx": {t}') % "1, 2"
                            for t in range(11)))
    with pytest.raises(ImportFailed, match=r"log.jsonl:11: over 10 lines read; an import "
                                           r"reads at most 10 lines"):
        import_trace("jsonl", path)


def test_csv_rows_are_not_all_held_at_once(tmp_path):
    """A log of one-expert rows, the most an import holds for its bytes: its peak stays
    within the figure docs/security.md states (45 times the bytes read)."""
    path = tmp_path / "log.csv"
    with open(path, "w") as f:
        f.write(CSV_HEAD)
        for t in range(20_000):
            f.writelines(f"{layer},{t},{(t + layer) % 64}\n" for layer in range(4))
    tracemalloc.start()
    try:
        trace = import_trace("csv", path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert trace.tokens == 20_000 and peak < 45 * path.stat().st_size


@pytest.mark.parametrize("argv, says", [
    (["trace", "import", "jsonl", "{log}", "-o", "{tmp}/no/t.npz"],
     "t.npz': cannot be written: '{tmp}/no': no such folder"),
    (["presets", "export", "2q", "-o", "{tmp}/no/p.env"],
     "p.env': cannot be written: '{tmp}/no': no such folder"),
])
def test_output_into_a_missing_folder_is_one_line(tmp_path, capsys, argv, says):
    log = tmp_path / "log.jsonl"
    log.write_text(ROW % "1, 2")
    err = one_line(capsys, [a.format(tmp=tmp_path, log=log) for a in argv])
    assert says.format(tmp=tmp_path) in err


def _small_files() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (16, 16))


@pytest.mark.parametrize("argv", [["trace", "import", "jsonl", "{log}", "-o", "{tmp}/t.npz"],
                                  ["presets", "export", "2q", "-o", "{tmp}/p.env"]])
def test_output_onto_a_full_disk_is_one_line_and_no_half_file(tmp_path, tuner_home, argv):
    """A file size limit of 16 bytes stands in for a full disk: the write fails part way."""
    log = tmp_path / "log.jsonl"
    log.write_text(ROW % "1, 2")
    done = subprocess.run([sys.executable, "-m", "tuner.cli",
                           *[a.format(tmp=tmp_path, log=log) for a in argv]],
                          cwd=ROOT, capture_output=True, text=True, preexec_fn=_small_files,
                          env={**os.environ, "TUNER_HOME": str(tuner_home)})
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "cannot be written: File too large" in done.stderr
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["log.jsonl"]


def npz(path: Path, arrays: dict, deflate: int | None = None) -> Path:
    """An .npz of `arrays`; `deflate` adds an experts array of that many zero slots [n, 2,
    2] whose header honestly declares it, written a piece at a time and deflated."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, arr in arrays.items():
            out = io.BytesIO()
            np.save(out, arr)
            z.writestr(f"{name}.npy", out.getvalue())
        if deflate:
            with z.open("experts.npy", "w", force_zip64=True) as f:
                npy.write_array_header_1_0(f, {"descr": "<i4", "fortran_order": False,
                                               "shape": (deflate, 2, 2)})
                for _ in range(deflate * 16 // (4 << 20)):
                    f.write(bytes(4 << 20))
    return path


def test_a_trace_meta_of_a_5000_digit_number_is_one_line(tmp_path, capsys):
    path = npz(tmp_path / "t.npz", {"experts": np.zeros((2, 1, 1), np.int32),
                                    "meta": np.array('{"num_experts": %s}' % ("9" * 5000))})
    err = one_line(capsys, ["trace", "stats", str(path)])
    assert "'meta' is not JSON: Exceeds the limit (4300 digits)" in err


def test_a_trace_declaring_more_than_a_trace_holds_is_refused_before_inflating(tmp_path):
    """A 1 GiB array of zeros deflated into 1 MiB: refused from its header."""
    path = npz(tmp_path / "bomb.npz", {"meta": np.array('{"num_experts": 8}')},
               deflate=1 << 26)
    assert path.stat().st_size < 2 << 20
    tracemalloc.start()
    try:
        with pytest.raises(TraceError, match=r"268,435,456 routed slots; a trace holds at "
                                             r"most 67,108,864"):
            trace_format.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20


def test_a_zip_directory_of_many_members_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "many.npz"
    with zipfile.ZipFile(path, "w") as z:
        for i in range(1000):
            z.writestr(f"a{i}.npy", b"")
    with pytest.raises(TraceError, match="lists 1,000 members .* at most 5 arrays"):
        trace_format.load(path)


def test_a_large_legal_trace_loads_within_its_arrays_and_40_mib(tmp_path):
    """The checks look at 16 MiB at a time: no sorted copy, no index arrays of the whole."""
    experts = np.tile(np.arange(8, dtype=np.int32), (1 << 16, 16, 1))  # 32 MiB, 2**23 slots
    experts[-1, -1, -1] = 0  # one duplicate, in the last routing
    path = tmp_path / "t.npz"
    with open(path, "wb") as f:
        np.savez_compressed(f, experts=experts, meta=np.array('{"num_experts": 8}'))
    tracemalloc.start()
    try:
        with pytest.raises(TraceError, match="token 65535, layer 15 names expert 0 twice"):
            trace_format.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < experts.nbytes + (40 << 20)


def test_an_expert_shard_of_nan_ends_run_with_one_line(tiny_model, tmp_path, capsys):
    folder = Path(shutil.copytree(tiny_model, tmp_path / "nan"))
    ckpt = Checkpoint(folder)
    for expert in range(ckpt.config.num_experts):
        for ext in ckpt.extents(0, expert):
            with open(ext.path, "r+b") as f:
                f.seek(ext.offset)
                f.write(b"\xff" * ext.length)
    err = one_line(capsys, ["run", "--model", str(folder), "--tokens", "4"])
    assert err.startswith("tuner run: the logits of token 1 are not finite") and "layer 0" in err


def spoiled(tiny_model: Path, tmp_path: Path, **changes) -> Path:
    folder = Path(shutil.copytree(tiny_model, tmp_path / "spoiled"))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return folder


def test_head_counts_that_disagree_with_the_weights_are_refused_at_load(tiny_model, tmp_path):
    config = json.loads((tiny_model / "config.json").read_text())
    folder = spoiled(tiny_model, tmp_path, num_key_value_heads=config["num_attention_heads"],
                     head_dim=config["head_dim"])
    with pytest.raises(ModelError, match=r"tensor model.layers.0.self_attn.k_proj.weight has "
                                         r"shape \[\d+, \d+\]; config.json's sizes make it"):
        Checkpoint(folder)


@pytest.mark.parametrize("recipe, says", [
    ("x", "tuner_recipe = 'x': tuner_recipe is the object tuner writes"),
    ({"name": "m", "topics": 10**9}, "tuner_recipe name 'm', topics 1000000000: "),
])
def test_a_tuner_recipe_that_is_not_tuners_is_refused(tiny_model, tmp_path, recipe, says):
    with pytest.raises(ModelError, match=says):
        Checkpoint(spoiled(tiny_model, tmp_path, tuner_recipe=recipe))


def test_a_lone_surrogate_in_a_prompt_is_refused(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt": "fine"}\n{"prompt": "a \\ud800 b"}\n')
    with pytest.raises(WorkloadError, match=r"line 2: a prompt holds a lone surrogate"):
        read_file(path)
    with pytest.raises(WorkloadError, match="holds a lone surrogate at character 2"):
        encode(None, "a \udcff b")  # a --prompt that was not UTF-8 on the command line


def test_a_workload_file_is_checked_a_line_at_a_time(tmp_path):
    """Checking a file (settings, an A/B) keeps no conversation; reading one keeps each at
    most 18 times its bytes (many one-word turns, the worst case docs/security.md states)."""
    path = tmp_path / "w.jsonl"
    path.write_text("".join(json.dumps({"turns": ["ab"] * 1000}) + "\n" for _ in range(300)))
    for keep, bound in ((False, 1 << 20), (True, 18 * path.stat().st_size)):
        tracemalloc.start()
        try:
            read_file(path, keep=keep)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < bound, (keep, peak)


@pytest.mark.parametrize("limit", [inputs.PRESET, inputs.WORKLOAD, inputs.MODEL_CONFIG])
def test_a_file_over_its_limit_is_refused_unread(tmp_path, limit):
    path = tmp_path / "big"
    with open(path, "wb") as f:
        f.truncate(limit.size + 1)  # sparse: nothing to read had it been read
    with pytest.raises(inputs.PathError, match=f"{limit.size + 1:,} bytes, over the limit; "):
        inputs.read_bytes(path, limit)


def test_a_trace_written_over_a_device_is_refused(tmp_path):
    trace = Trace(np.zeros((1, 1, 1), np.int32), {"num_experts": 1})
    with pytest.raises(TraceError, match="cannot be written: it is not a regular file"):
        trace_format.save(trace, Path("/dev/null"))


def test_the_routing_knob_reads_a_trace_a_routing_at_a_time():
    """What the server's routing knob keeps of a trace beside its arrays: nothing of the
    size of the trace (the routings as lists were 8 times the array)."""
    from tuner.engine.step.routing_source import TraceRouting

    experts = np.tile(np.arange(8, dtype=np.int32), (1 << 14, 16, 1))  # 8 MiB, 2**21 slots
    trace = Trace(experts, {"num_experts": 8})
    tracemalloc.start()
    try:
        routing = TraceRouting(trace, 16, 8, 8, "t.npz")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    routing.position = 5
    assert routing.select(3, None, None, None)[0] == list(range(8))
