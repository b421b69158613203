"""The engine imports torch, numpy, safetensors, tokenizers (KvikIO where installed), the
standard library and the project's plain modules only (the settings, web and terminal
libraries are the UIs')."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import tuner

PACKAGE = Path(tuner.__file__).parent
LIBRARIES = {"torch", "numpy", "safetensors", "tokenizers", "typing_extensions", "triton",
             "kvikio"}
PLAIN = {"tuner", "tuner.config", "tuner.errors", "tuner.knobs", "tuner.interplay"}  # stdlib only


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_engine_imports_libraries_and_plain_modules_only():
    for path in (PACKAGE / "engine").glob("*.py"):
        for name in imported(path):
            top = name.split(".")[0]
            allowed = (name.startswith("tuner.engine") or name in PLAIN if top == "tuner"
                       else top in sys.stdlib_module_names or top in LIBRARIES)
            assert allowed, f"{path.name} imports {name}"


def test_the_plain_modules_import_the_standard_library_only():
    """The knob table's own imports included: the settings library reads it too."""
    plain = ("config", "errors", "knobs", "interplay", "vocabulary/inputs", "vocabulary/policies")
    for name in plain:
        for module in imported(PACKAGE / f"{name}.py"):
            ok = module.split(".")[0] in sys.stdlib_module_names or module.removeprefix(
                "tuner.").replace(".", "/") in plain
            assert ok, f"{name}.py imports {module}"
