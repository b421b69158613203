"""The arrows of ARCHITECTURE.md: which rooms (packages and top modules of tuner) may import
which. Read from the source, function-level imports included, so a lazy import cannot hide
an arrow; imports under `if TYPE_CHECKING:` name types only and are not arrows. Only static
absolute imports are seen: the benchmark table names its sections' modules as text, and
cli.py imports a command's module by name when it runs."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

import tuner

ROOT = Path(tuner.__file__).parent
ARCHITECTURE = ROOT.parent / "ARCHITECTURE.md"

# Every room, from the bottom up. A room imports only rooms on lines above its own; rooms
# on one line are peers and import nothing of each other. ARCHITECTURE.md draws this table.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "config", "openmp"),
    ("knobs",),
    ("vocabulary",),
    ("interplay", "charts"),
    ("engine",),
    ("settings", "format", "llamacpp"),
    ("presets", "traces"),
    ("measure",),
    ("bench", "tune"),
    ("control",),
    ("web", "ui"),
    ("commands",),
    ("cli",),
    ("docs_pictures",),
    ("docs",),
)
LEVEL = {room: level for level, line in enumerate(LAYERS) for room in line}
# The arrows against the order, each the one file that may draw it and the modules it may
# import: the knob table reads the engine's path limits and cache-policy registry (both
# standard library only, checked below); the terminal UI's benchmark serves the web app,
# to measure the connected UI against it.
EXCEPT = {
    "knobs.py": {"tuner.vocabulary.inputs", "tuner.vocabulary.policies"},
    "ui/bench.py": {"tuner.web"},
}
# Libraries a room never imports (beyond what its line allows).
LIBRARIES = {
    # the words the control plane and the remote UI share with the engine, without torch
    "vocabulary": {"torch", "triton", "safetensors", "tokenizers", "pydantic", "fastapi"},
    "engine": {"pydantic", "pydantic_settings", "fastapi", "starlette", "textual", "uvicorn"},
    "control": {"fastapi", "starlette", "textual", "uvicorn"},
    "web": {"textual"},
    "ui": {"fastapi", "starlette", "uvicorn"},
    "charts": {"torch"},
}
# Never imported by any room: they are outside the package.
OUTSIDE = {"lab", "results", "tests", "tools"}
# What loads the standard library only (and tuner's own modules of the same kind).
STANDARD_ONLY = ("errors.py", "config.py", "knobs.py", "interplay.py", "vocabulary/inputs.py",
                 "vocabulary/policies.py", "llamacpp/__init__.py")


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
        and node.test.id == "TYPE_CHECKING"


def imports(path: Path) -> set[str]:
    """The modules `path` imports, dotted (`from tuner import x` as tuner.x)."""
    found = set()
    todo = [ast.parse(path.read_text())]
    while todo:
        node = todo.pop()
        todo += [child for child in ast.iter_child_nodes(node) if not _type_checking(child)]
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= ({f"tuner.{a.name}" for a in node.names} if node.module == "tuner"
                      else {node.module})
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def room_of(module: str) -> str | None:
    """The room of a tuner module; None for the package itself (its __version__)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LEVEL else None


def rooms() -> set[str]:
    return {p.stem for p in ROOT.iterdir()
            if (p.suffix == ".py" and p.stem not in ("__init__", "__main__"))
            or (p / "__init__.py").is_file()}


def files(room: str) -> list[Path]:
    folder = ROOT / room
    return sorted(folder.rglob("*.py")) if folder.is_dir() else [ROOT / f"{room}.py"]


def wrong_arrows(room: str, name: str, modules: set[str]) -> list[str]:
    """The modules of `modules` that file `name` of `room` must not import."""
    wrong = []
    for module in sorted(modules):
        top = module.split(".")[0]
        if top == "tuner":
            other = room_of(module)
            allowed = other is None or other == room or LEVEL[other] < LEVEL[room] or any(
                module == e or module.startswith(e + ".") for e in EXCEPT.get(name, ()))
        else:
            allowed = top not in LIBRARIES.get(room, set()) | OUTSIDE
        if not allowed:
            wrong.append(module)
    return wrong


def test_every_room_is_on_one_line():
    placed = [room for line in LAYERS for room in line]
    assert len(placed) == len(set(placed))
    assert set(placed) == rooms()


@pytest.mark.parametrize("room", [room for line in LAYERS for room in line])
def test_a_room_imports_only_the_rooms_below_it(room):
    wrong = {}
    for path in files(room):
        name = str(path.relative_to(ROOT))
        wrong[name] = wrong_arrows(room, name, imports(path))
    assert {k: v for k, v in wrong.items() if v} == {}


def test_a_peer_or_a_higher_room_is_refused(tmp_path):
    """The rule reads as written: bench and tune are peers, measure is below bench."""
    assert wrong_arrows("bench", "bench/x.py", {"tuner.measure.quality"}) == []
    assert wrong_arrows("measure", "measure/x.py", {"tuner.bench.sections"}) == \
        ["tuner.bench.sections"]
    assert wrong_arrows("tune", "tune/x.py", {"tuner.bench"}) == ["tuner.bench"]
    assert wrong_arrows("knobs", "knobs.py", {"tuner.vocabulary.inputs",
                                              "tuner.engine.memory.store"}) \
        == ["tuner.engine.memory.store"]
    assert wrong_arrows("ui", "ui/app.py", {"tuner.web.app"}) == ["tuner.web.app"]
    assert wrong_arrows("control", "control/x.py", {"fastapi", "lab.read_cost"}) == \
        ["fastapi", "lab.read_cost"]


@pytest.mark.parametrize("name", STANDARD_ONLY)
def test_the_plain_modules_load_the_standard_library_only(name):
    outside = {m for m in imports(ROOT / name) if m.split(".")[0] not in
               sys.stdlib_module_names and m.split(".")[0] != "tuner"}
    assert outside == set()
    for module in (m for m in imports(ROOT / name) if m.startswith("tuner.")):
        path = ROOT.joinpath(*module.split(".")[1:])
        mine = f"{path.relative_to(ROOT)}.py" if path.with_suffix(".py").is_file() \
            else f"{path.relative_to(ROOT)}/__init__.py"
        assert mine in STANDARD_ONLY, f"{name} imports {module}, which is not plain"


def architecture_lines() -> list[tuple[str, ...]]:
    """The rooms on each line of ARCHITECTURE.md's picture of the arrows."""
    section = ARCHITECTURE.read_text().split("## The arrows", 1)[1]
    block = section.split("```", 2)[1]
    names = (re.split(r"\s{2,}", line.strip())[0] for line in block.splitlines())
    return [tuple(n.strip() for n in text.split(",")) for text in names if text]


def test_the_architecture_page_draws_this_table():
    assert architecture_lines() == list(LAYERS)
    listed = ARCHITECTURE.read_text().split("## The rooms", 1)[1].split("## The arrows")[0]
    missing = [room for room in rooms()
               if f"`tuner/{room}/`" not in listed and f"`tuner/{room}.py`" not in listed
               and f"`{room}.py`" not in listed]
    assert missing == []


# The views see the control plane, their own room and the words every room shares (the knob
# table, the formatter, the errors, the charts and the vocabulary: what a snapshot holds).
# What lies below the control plane (the engine, settings, presets, traces, measure, tune,
# bench) they reach through it, so a view works alike on an engine in its process and on a
# server's. A view's benchmark section builds the session it measures, as `tuner bench`
# runs it.
VIEWS = ("web", "ui")
SHARED = {"config", "errors", "knobs", "format", "charts", "vocabulary", "control"}
BENCHMARKS = {"web/bench.py", "ui/bench.py"}


@pytest.mark.parametrize("room", VIEWS)
def test_a_view_sees_the_control_plane_and_the_vocabulary_only(room):
    wrong = {}
    for path in files(room):
        name = str(path.relative_to(ROOT))
        if name in BENCHMARKS:
            continue
        wrong[name] = sorted(m for m in imports(path) if m.split(".")[0] == "tuner"
                             and room_of(m) not in SHARED | {room, None})
    assert {k: v for k, v in wrong.items() if v} == {}


# The control plane's requests, answers and operations declare what a view offers and
# reads, and the remote terminal UI loads them: they import the words below them only (the
# vocabulary, the knob table, the settings), so a name a request checks (a preset's, a rule
# set's, an objective's, a workload's) belongs to the lowest room that owns it, never to the
# room that runs it (measure, tune, traces, presets).
DECLARATIONS = ("control/models.py", "control/answers.py", "control/api.py")
WORDS = {"errors", "config", "knobs", "vocabulary", "settings"}


@pytest.mark.parametrize("name", DECLARATIONS)
def test_the_control_planes_declarations_import_only_the_words_below_them(name):
    mine = {f"tuner.{n.removesuffix('.py').replace('/', '.')}" for n in DECLARATIONS}
    wrong = sorted(m for m in imports(ROOT / name) if m.split(".")[0] == "tuner"
                   and room_of(m) not in WORDS | {None} and m not in mine)
    assert wrong == []
