"""What the commands share: knob flags generated from the knob table, settings from the
flags, the demo model made on first use, integer lists and JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from tuner.knobs import GROUPS, INPUT_KNOBS, knob_flag

if TYPE_CHECKING:
    from pydantic import BaseModel

    from tuner.settings import Settings

INTERRUPTED = 130  # the exit status of a command stopped by Ctrl-C or SIGTERM


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
            text = f"{k.help} [{k.allowed()}; default {k.default!r}; env {k.env}]"
            g.add_argument(knob_flag(k.name), dest=f"knob_{k.name}",
                           metavar=k.type.__name__.upper(),
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
    """`settings_from_args`, then the demo model made first when the settings run it and it
    is not there yet: the first start writes ~0.6 GB, which no command does silently."""
    settings = settings_from_args(args)
    from tuner.engine import synth

    if not settings.model and not synth.is_made():
        print(f"tuner {args.command}: making the demo model in {synth.default_model_path()} "
              "(first start only, ~0.6 GB; the folder is set by TUNER_HOME)", file=sys.stderr,
              flush=True)
        tty = sys.stderr.isatty()

        def progress(done: int, total: int) -> None:
            if tty or done == total:
                end = "\n" if done == total else ""
                print(f"\r  wrote {done} of {total} shards", end=end, file=sys.stderr,
                      flush=True)

        synth.ensure(progress=progress)
    return settings


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
