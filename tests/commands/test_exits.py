"""The command line's exit statuses: one per kind of outcome, declared once (tuner.errors.Exit)
and listed by `tuner --help`; every command fails through the one printer, so the same
mistake ends alike whichever command meets it, and nothing else ends the process."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tuner
from tuner.cli import main
from tuner.errors import Exit, exit_table

ROOT = Path(tuner.__file__).parent


def trees() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text()) for p in ROOT.rglob("*.py")}


def _main_block(node: ast.AST) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


def test_no_module_but_the_command_line_ends_the_process_itself():
    """No SystemExit raised or sys.exit called outside cli.py: a script's `__main__` block
    may hand the status of `tuner.errors.run` (or the command line's main) to sys.exit."""
    wrong = []
    for name, tree in trees().items():
        allowed = set()
        for node in ast.walk(tree):
            if _main_block(node):
                allowed |= {id(n) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if name == "cli.py" or id(node) in allowed:
                continue
            if isinstance(node, ast.Name) and node.id == "SystemExit" or (
                    isinstance(node, ast.Attribute) and node.attr == "exit"
                    and isinstance(node.value, ast.Name) and node.value.id == "sys"):
                wrong.append(f"{name}:{node.lineno}")
    assert wrong == []


def _entry_points(tree: ast.Module) -> set[str]:
    """The functions a command module registers as commands (`set_defaults(func=...)`)."""
    return {k.value.id for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "set_defaults"
            for k in node.keywords if k.arg == "func" and isinstance(k.value, ast.Name)}


def _returns(func: ast.FunctionDef) -> list[ast.expr]:
    """What `func` returns, not what the functions defined inside it return."""
    out, todo = [], list(func.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            out.append(node.value)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            todo += ast.iter_child_nodes(node)
    return out


def _statuses(tree: ast.Module) -> list[ast.expr]:
    """What a module gives as an exit status: what its commands return (each branch of a
    conditional) and the statuses its errors carry."""
    commands = _entry_points(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in commands:
            found += _returns(node)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "CommandError":
            found += node.args[1:] + [k.value for k in node.keywords if k.arg == "exit_status"]
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "exit_status"
                                                  for t in node.targets):
            found.append(node.value)
    while any(isinstance(v, ast.IfExp) for v in found):
        found = [b for v in found for b in ((v.body, v.orelse) if isinstance(v, ast.IfExp)
                                            else (v,))]
    return found


def test_every_status_a_command_gives_is_in_the_table():
    """A command returns a literal status of the table, a member of it or what another
    function returns (a status outside the table ends it as a bug: tuner.errors.run)."""
    declared = {e.value for e in Exit}
    wrong = []
    for name, tree in trees().items():
        for value in _statuses(tree):
            if isinstance(value, ast.Constant):
                ok = value.value in declared
            elif isinstance(value, ast.Attribute) and getattr(value.value, "id", "") == "Exit":
                ok = value.attr in Exit.__members__
            else:
                ok = isinstance(value, ast.Call)
            if not ok:
                wrong.append(f"{name}:{value.lineno}: {ast.unparse(value)}")
    assert wrong == []


def test_the_help_lists_the_table(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert exit_table() in out
    for e in Exit:
        assert f"  {e.value:>3}  " in out and e.meaning.split()[0] in out


@pytest.mark.parametrize("argv", [["run", "--tokens", "4"], ["tui"], ["serve", "--port", "0"],
                                  ["bench", "--only", "read"], ["model", "stats"],
                                  ["trace", "record", "-o", "x.npz"]])
def test_a_missing_model_folder_ends_alike_in_every_command(argv, capsys, tmp_path):
    missing = tmp_path / "no-model"
    assert main([*argv, "--model", str(missing)]) == Exit.USAGE
    err = capsys.readouterr().err.strip().splitlines()
    command = " ".join(a for a in argv[:2] if not a.startswith("-"))
    assert len(err) == 1 and err[0].startswith(f"tuner {command}: ") and str(missing) in err[0]


def test_a_bug_ends_with_its_traceback_and_its_own_status(monkeypatch, capsys):
    from tuner.commands import knobs

    def broken(args) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(knobs, "main", broken)
    assert main(["knobs"]) == Exit.BUG
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: a bug" in err
    assert err.strip().splitlines()[-1].startswith("tuner knobs: an unexpected error")


def test_a_status_outside_the_table_is_a_bug(monkeypatch, capsys):
    from tuner.commands import knobs

    monkeypatch.setattr(knobs, "main", lambda args: 42)
    assert main(["knobs"]) == Exit.BUG
