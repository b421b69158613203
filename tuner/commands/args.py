"""What the commands share: knob flags generated from the knob table, settings from the
flags, the demo model made on first use, progress on stderr, integer lists and JSON
output."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tuner.errors import CommandError, Exit
from tuner.knobs import GROUPS, INPUT_KNOBS, knob_flag, written

if TYPE_CHECKING:
    from pydantic import BaseModel

    from tuner.settings import Settings


def given_knobs(args: argparse.Namespace) -> dict[str, Any]:
    """The knob flags given on the command line, by knob name."""
    return {k.name: getattr(args, f"knob_{k.name}") for k in INPUT_KNOBS
            if getattr(args, f"knob_{k.name}", None) is not None}


def add_knob_flags(p: argparse.ArgumentParser) -> None:
    """--preset plus one flag per knob (values are validated by the settings model)."""
    p.add_argument("--preset", help="preset name or path to a .toml file")
    for group in GROUPS:
        g = p.add_argument_group(f"{group} knobs")
        for k in (k for k in INPUT_KNOBS if k.group == group):
            text = f"{k.help} [{k.allowed()}; default {written(k.default)!r}; env {k.env}]"
            g.add_argument(knob_flag(k.name), dest=f"knob_{k.name}",
                           metavar="N,N,..." if k.type is tuple else k.type.__name__.upper(),
                           help=text.replace("%", "%%"))  # argparse formats help with %


def add_model_flags(p: argparse.ArgumentParser, model: type[BaseModel],
                    defaults: dict[str, Any] | None = None) -> None:
    """One argument per field of a request model (tuner.control.models), with its help:
    positional for a required field, --flag for the others. Values stay text for the model
    to read (`model_values`); `defaults` replaces a field's default on this command."""
    from tuner.control.models import field_order

    defaults = defaults or {}
    for name in field_order(model):
        field = model.model_fields[name]
        text = (field.description or "").replace("%", "%%")  # argparse formats help with %
        if field.is_required():
            p.add_argument(name, metavar=name.upper(), help=text)
            continue
        default = defaults.get(name, field.default)
        shown = f" (default {default})" if default not in (None, "", []) else ""
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, default=defaults.get(name),
                       help=text + shown)


def model_values(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The model's fields given on the command line (or defaulted by it), by name."""
    return {name: value for name in model.model_fields
            if (value := getattr(args, name, None)) is not None}


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Defaults < preset < environment < flags. Raises SettingsError or PresetError."""
    from tuner.presets import resolve
    from tuner.settings import load

    preset = resolve(args.preset).knobs if getattr(args, "preset", None) else {}
    return load(preset=preset, cli=given_knobs(args))


def engine_settings(args: argparse.Namespace) -> Settings:
    """`settings_from_args`, then the demo model made first when the settings run it."""
    settings = settings_from_args(args)
    make_demo_model(args.command, settings)
    return settings


def make_demo_model(command: str, settings: Settings) -> None:
    """Makes the demo model when `settings` run it and it is not there yet: the first start
    writes ~0.6 GB, which no command does silently."""
    from tuner.vocabulary import recipes

    if settings.model or recipes.is_made():
        return
    print(f"tuner {command}: making the demo model in {recipes.default_model_path()} (first "
          "start only, ~0.6 GB; the folder is set by TUNER_HOME)", file=sys.stderr, flush=True)
    from tuner.engine.weights import synth

    with progress("shards") as update:
        synth.ensure(progress=update)


@contextmanager
def progress(what: str, total: int | None = None, poll: Callable[[], int] | None = None,
             counted: bool = True) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr while the block runs, on a terminal only: the block calls
    `update(done, total)`, or `poll()` is read four times a second; not `counted`, it
    shows the time spent."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(stderr=True)
    if not console.is_terminal:
        yield lambda done, total: None
        return
    columns = [TextColumn("{task.description}"), BarColumn(),
               *([MofNCompleteColumn()] if counted else []), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(what, total=total)

        def update(done: int, total: int | None = total) -> None:
            bar.update(task, completed=done, total=total)

        stop = threading.Event()

        def follow() -> None:
            while poll is not None and not stop.wait(0.25):
                update(poll())

        threading.Thread(target=follow, daemon=True).start()
        try:
            yield update
        finally:
            stop.set()


@contextmanager
def extra(name: str) -> Iterator[None]:
    """Imports within need the optional extra `name` (pyproject.toml): a library it brings
    that is not installed is one line saying how to install it."""
    try:
        yield
    except ModuleNotFoundError as err:
        if (err.name or "tuner").partition(".")[0] == "tuner":
            raise  # a module of tuner itself: a bug, not a missing extra
        raise CommandError(f"{err.name} is not installed; it comes with the {name} extra: "
                           f"pip install 'tuner[{name}]'", Exit.UNAVAILABLE) from None


def int_list(what: str, minimum: int):
    """An argparse type for comma-separated integers such as 1,2,3, each >= minimum."""

    def parse(text: str) -> list[int]:
        try:
            values = [int(t) for t in text.split(",") if t.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {what} as comma-separated integers like 1,2,3, got {text!r}"
            ) from None
        if not values or min(values) < minimum:
            raise argparse.ArgumentTypeError(f"{what}: one or more integers >= {minimum}")
        return values

    return parse


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=1)
    sys.stdout.write("\n")
