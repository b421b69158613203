"""Bad model folders: one exception type from the loader, whose message names the file,
what is wrong and what is allowed, and one line from every command, never a traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.cli import main as cli
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.vocabulary.model_config import ModelError

# name -> (how the folder is spoiled, the file the message must name, what it must say)
BAD = {
    "missing": ("no folder at all", "missing", "does not exist"),
    "empty": ("an empty folder", "empty/config.json", "is missing"),
    "no-weights": ("config.json alone", "no-weights", "no *.safetensors weights"),
    "invalid-json": ("config.json cut short", "invalid-json/config.json",
                     "is not readable JSON"),
    "not-moe": ("a dense model's config", "not-moe/config.json", "'llama' is not supported"),
    "no-num-experts": ("num_experts left out", "no-num-experts/config.json",
                       "none of num_experts, num_local_experts is set"),
    "truncated": ("a shard cut in half", ".safetensors is truncated", "write or download it"),
    "not-safetensors": ("a shard that is text", ".safetensors is not a safetensors file",
                        "config.json and its *.safetensors"),
    "too-many-experts": ("30 million experts", "too-many-experts/config.json",
                         "num_experts = 30000000: it must be a whole number from 1 to 65,536"),
    "huge-vocab": ("a vocabulary of 2**40", "huge-vocab/config.json",
                   "vocab_size = 1099511627776: it must be a whole number from 1 to"),
    "top-k-over": ("top-k above the experts", "top-k-over/config.json",
                   "num_experts_per_tok = 17: it must be a whole number from 1 to num_experts"),
    "nested-json": ("100,000 nested [", "nested-json/config.json", "nested too deeply"),
}
# config.json keys a spoiled folder changes
CHANGED = {"too-many-experts": {"num_experts": 30_000_000}, "huge-vocab": {"vocab_size": 2**40},
           "top-k-over": {"num_experts_per_tok": 17}}


def spoil(name: str, good: Path, root: Path) -> Path:
    folder = root / name
    config = json.loads((good / "config.json").read_text())
    if name == "missing":
        return folder
    if name in ("truncated", "not-safetensors"):
        shutil.copytree(good, folder)
        shard = sorted(folder.glob("*.safetensors"))[1]
        data = shard.read_bytes()
        shard.write_bytes(data[: len(data) // 2] if name == "truncated" else b"not weights")
        return folder
    folder.mkdir()
    if name == "no-weights":
        (folder / "config.json").write_text(json.dumps(config))
    elif name == "invalid-json":
        (folder / "config.json").write_text(json.dumps(config)[:40])
    elif name == "not-moe":
        (folder / "config.json").write_text(json.dumps({**config, "model_type": "llama"}))
    elif name == "no-num-experts":
        config.pop("num_experts")
        (folder / "config.json").write_text(json.dumps(config))
    elif name == "nested-json":
        (folder / "config.json").write_text("[" * 100_000)
    elif name in CHANGED:
        shutil.rmtree(folder)
        shutil.copytree(good, folder)
        (folder / "config.json").write_text(json.dumps({**config, **CHANGED[name]}))
    return folder


@pytest.fixture(scope="module")
def bad_models(tiny_model, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bad-models")
    return {name: spoil(name, tiny_model, root) for name in BAD}


@pytest.mark.parametrize("name", BAD)
def test_the_loader_names_the_file_and_what_is_wrong(bad_models, name):
    _, file, what = BAD[name]
    with pytest.raises(ModelError) as err:
        Checkpoint(bad_models[name])
    message = str(err.value)
    assert file in message and what in message, message
    assert "\n" not in message


# Every command that opens a model, with arguments that would run it briefly.
COMMANDS = {
    "run": ["run", "--tokens", "2"],
    "serve": ["serve", "--port", "0"],
    "model stats": ["model", "stats", "--tokens", "2"],
    "trace record": ["trace", "record", "--tokens", "2", "-o", "{tmp}/t.npz"],
    "ab": ["ab", "baseline", "2q", "--pairs", "1", "--tokens", "8"],
    "bench": ["bench", "--only", "read,machinery,telemetry", "--tokens", "2"],
    "tui": ["tui"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_prints_one_line_for_every_bad_model(bad_models, command, capsys,
                                                           tmp_path):
    args = [a.format(tmp=tmp_path) for a in COMMANDS[command]]
    for name, folder in bad_models.items():
        try:
            status = cli([*args, "--model", str(folder)])
        except SystemExit as stop:  # a command's own "tuner CMD: ..." line, as Python
            print(stop.code, file=sys.stderr)  # prints it
            status = 1
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert status != 0, (command, name, err)
        assert len(lines) == 1 and BAD[name][1] in lines[0], (command, name, err)
        assert lines[0].startswith("tuner"), lines[0]


def test_a_real_process_prints_no_traceback(bad_models):
    out = subprocess.run([sys.executable, "-m", "tuner", "run", "--model",
                          str(bad_models["no-num-experts"])], capture_output=True, text=True)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        f"tuner run: {bad_models['no-num-experts'] / 'config.json'}: none of num_experts, "
        "num_local_experts is set: a qwen3_moe MoE config names its number of routed experts"]
