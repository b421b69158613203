"""The table of benchmark sections: every entry runs, the command line and the docs read
it, and the bench and measure packages stay off the web and the terminal UI."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tuner
from tuner.bench.sections import DEFAULT, GPU, SECTIONS, chosen, markdown
from tuner.cli import main

PACKAGE = Path(tuner.__file__).parent
UI_OR_WEB = re.compile(r"tuner\.(web|ui)(\.|$)")


def test_every_section_is_a_module_that_measures_and_prints():
    assert len({s.name for s in SECTIONS}) == len(SECTIONS)
    for section in SECTIONS:
        code = importlib.import_module(section.module)
        assert callable(code.measure) and callable(code.text), section.name
    assert DEFAULT == ("read", "machinery", "telemetry", "link", "limit")
    assert GPU == ("greedy", "resident", "read", "machinery", "link", "limit", "prefetch", "peer",
                   "llamacpp", "sites")


def test_sections_come_in_the_tables_order_and_unknown_ones_are_named(refuses):
    assert [s.name for s in chosen(["limit", " read", ""])] == ["read", "limit"]
    with pytest.raises(ValueError, match="unknown section.s. nope; allowed: greedy, resident"):
        chosen(["read", "nope"])
    refuses(["bench", "--only", "read,nope"], "tuner bench: unknown section")
    refuses(["bench", "--only", "ui", "--rounds", "0"], "--rounds must be >= 1, got 0")


def test_a_section_that_cannot_run_here_says_why_on_its_line():
    link = next(s for s in SECTIONS if s.name == "link")
    assert link.text({"skipped": "no CUDA device"}) == "(d) link: no CUDA device"


def test_bench_list_prints_the_table_of_sections(capsys):
    assert main(["bench", "--list"]) == 0 and capsys.readouterr().out == markdown()


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("package", ["bench", "measure"])
def test_bench_and_measure_import_neither_the_web_nor_the_ui(package):
    bad = {str(p.relative_to(PACKAGE)): name for p in (PACKAGE / package).rglob("*.py")
           for name in _imports(p) if UI_OR_WEB.match(name)}
    assert not bad
    modules = [f"tuner.{package}.{p.stem}" for p in (PACKAGE / package).glob("*.py")]
    code = (f"import sys\nfor m in {modules!r}: __import__(m)\n"
            "print(sorted(m for m in sys.modules if m.startswith(('tuner.web', 'tuner.ui'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "[]"
