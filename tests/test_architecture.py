"""The arrows of ARCHITECTURE.md: which rooms (packages and top modules of tuner) may import
which. Read from the source, function-level imports included, so a lazy import cannot hide
an arrow; imports under `if TYPE_CHECKING:` name types only and are not arrows. Only static
absolute imports are seen: the benchmark table names its sections' modules as text."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tuner

ROOT = Path(tuner.__file__).parent
HIGHER = {"settings", "presets", "control", "web", "ui", "commands", "cli", "measure", "bench",
          "tune", "traces", "charts", "docs", "docs_pictures"}
ABOVE_SETTINGS = {"traces", "measure", "bench", "tune", "control", "web", "ui", "commands",
                  "cli"}
# room -> the rooms and libraries it never imports
NEVER = {
    "engine": HIGHER,
    "settings": ABOVE_SETTINGS,
    "presets": ABOVE_SETTINGS,
    "control": {"web", "ui", "commands", "cli", "fastapi", "starlette", "textual", "uvicorn"},
    "web": {"ui", "commands", "cli", "textual"},
    "ui": {"web", "commands", "cli", "fastapi"},
    "measure": {"control", "web", "ui", "commands", "cli"},
    "bench": {"control", "web", "ui", "commands", "cli"},
    "tune": {"control", "web", "ui", "commands", "cli"},
    "traces": {"control", "web", "ui", "commands", "cli"},
    "commands": {"cli"},
    # charts draw plain data (an A/B's result, a tune's rows) handed to them
    "charts": HIGHER - {"charts"} | {"engine", "torch"},
}
# the one file of a room that may cross its arrow: the terminal UI's benchmark serves the
# web app, to measure the connected UI against it
EXCEPT = {"ui/bench.py": {"web"}}

# The views see the control plane, their own room and the vocabulary every room shares: the
# knob table, the formatter, the errors, the charts and the engine's torch-free tables of
# what a snapshot holds. What lies below the control plane (the engine's runtime, settings,
# presets, traces, measure, tune, bench) they reach through it, so a view works alike on an
# engine in its process and on a server's.
VIEWS = ("web", "ui")
VOCABULARY = {"tuner", "tuner.config", "tuner.errors", "tuner.knobs", "tuner.format",
              "tuner.charts", "tuner.engine.counters", "tuner.engine.snapshot"}
# a view's benchmark section builds the session it measures, as `tuner bench` runs it
BENCHMARKS = {"web/bench.py", "ui/bench.py"}


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
        and node.test.id == "TYPE_CHECKING"


def modules(path: Path) -> set[str]:
    """The modules `path` imports, by their full names; `from tuner.engine import counters`
    names tuner.engine.counters, `from tuner import __version__` tuner."""
    found = set()
    todo = [ast.parse(path.read_text())]
    while todo:
        node = todo.pop()
        todo += [child for child in ast.iter_child_nodes(node) if not _type_checking(child)]
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {_module(f"{node.module}.{a.name}") or node.module for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def _module(name: str) -> str | None:
    """`name` when it is a module or package of tuner."""
    if not name.startswith("tuner."):
        return None
    path = ROOT.joinpath(*name.split(".")[1:])
    return name if path.with_suffix(".py").is_file() or path.is_dir() else None


def imports(path: Path) -> set[str]:
    """The rooms of tuner and the libraries `path` imports, by their first names."""
    found = set()
    for name in modules(path):
        parts = name.split(".")
        found.add(parts[1] if parts[0] == "tuner" and len(parts) > 1 else parts[0])
    return found


def files(room: str) -> list[Path]:
    folder = ROOT / room
    return sorted(folder.rglob("*.py")) if folder.is_dir() else [ROOT / f"{room}.py"]


@pytest.mark.parametrize("room", sorted(NEVER))
def test_a_room_imports_nothing_it_must_not(room):
    wrong = {}
    for path in files(room):
        name = str(path.relative_to(ROOT))
        wrong[name] = sorted(imports(path) & (NEVER[room] - EXCEPT.get(name, set())))
    assert {k: v for k, v in wrong.items() if v} == {}


@pytest.mark.parametrize("room", VIEWS)
def test_a_view_sees_the_control_plane_and_the_vocabulary_only(room):
    seen = {"tuner.control", f"tuner.{room}"}
    wrong = {}
    for path in files(room):
        name = str(path.relative_to(ROOT))
        if name in BENCHMARKS:
            continue
        wrong[name] = sorted(m for m in modules(path) if m.split(".")[0] == "tuner"
                             and m not in VOCABULARY and ".".join(m.split(".")[:2]) not in seen)
    assert {k: v for k, v in wrong.items() if v} == {}
