"""llama-server as the llamacpp tests run it: started with a model and a preset's flags
and `-v`, asked for greedy tokens with the prompt given as ids, its log read for where it
placed each layer's expert tensors."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

# llama-model-loader.cpp at -v: "tensor blk.3.ffn_up_exps.weight (0 MiB f32) buffer type
# overridden to CPU"
OVERRIDE = re.compile(r"tensor blk\.(\d+)\.ffn_(?:gate|up|down)_exps\.weight \(.*?\) "
                      r"buffer type overridden to (\S+)")
READY_S = 180  # loading the demo model's GGUF on a busy 2-core machine


class Refused(AssertionError):
    """llama-server exited instead of serving: it did not accept its flags or model."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    def __init__(self, binary: Path, model: Path, flags: list[str], log: Path):
        self.port = free_port()
        self.log = log
        cmd = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port),
               "-v", *flags]
        self.command = " ".join(cmd)
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Refused(f"llama-server exited with {self.proc.returncode} before serving: "
                              f"{self.command}\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url("/health"), timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"llama-server not ready in {READY_S} s: {self.command}\n"
                             f"{self.log_tail()}")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def post(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(self.url(path), json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())

    def greedy(self, prompt_ids: list[int], n: int, top: int) -> dict:
        """The /completion answer for `n` greedy tokens after `prompt_ids` (a prompt of ids
        is not wrapped in special tokens): "tokens" are their ids, and each of
        "completion_probabilities" has the `top` likeliest next tokens and their log
        probabilities before sampling."""
        return self.post("/completion", {"prompt": prompt_ids, "n_predict": n,
                                         "temperature": 0, "return_tokens": True,
                                         "cache_prompt": False, "n_probs": top})

    def pinned(self) -> dict[int, str]:
        """Layer -> the buffer type the log says its expert tensors were overridden to (each
        tensor is logged once per load pass); AssertionError if one layer's differ."""
        found: dict[int, set[str]] = {}
        for layer, buffer in OVERRIDE.findall(self.log.read_text(errors="replace")):
            found.setdefault(int(layer), set()).add(buffer)
        mixed = {layer: b for layer, b in found.items() if len(b) > 1}
        assert not mixed, f"layers whose expert tensors went to several buffers: {mixed}"
        return {layer: b.pop() for layer, b in sorted(found.items())}

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
