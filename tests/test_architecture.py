"""The arrows of ARCHITECTURE.md: which rooms (packages of tuner) may import which. Read
from the source, function-level imports included, so a lazy import cannot hide an arrow."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tuner

ROOT = Path(tuner.__file__).parent
HIGHER = {"settings", "presets", "control", "web", "ui", "commands", "cli", "measure", "bench",
          "tune", "traces"}
# room -> the rooms and libraries it never imports
NEVER = {
    "engine": HIGHER,
    "control": {"web", "ui", "commands", "cli", "fastapi", "starlette", "textual", "uvicorn"},
    "web": {"ui", "commands", "cli", "textual"},
    "measure": {"web", "ui", "commands", "cli"},
    "bench": {"web", "ui", "commands", "cli"},
    "tune": {"control", "web", "ui", "commands", "cli"},
    "traces": {"control", "web", "ui", "commands", "cli"},
    "commands": {"cli"},
}


def imports(path: Path) -> set[str]:
    """The rooms of tuner and the libraries `path` imports, by their first names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            found.add(parts[1] if parts[0] == "tuner" and len(parts) > 1 else parts[0])
    return found


@pytest.mark.parametrize("room", sorted(NEVER))
def test_a_room_imports_nothing_it_must_not(room):
    wrong = {str(path.relative_to(ROOT.parent)): sorted(imports(path) & NEVER[room])
             for path in (ROOT / room).rglob("*.py")}
    assert {k: v for k, v in wrong.items() if v} == {}
