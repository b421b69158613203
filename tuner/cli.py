"""The `tuner` command line. Knob flags are generated from the knob table.

Each subcommand lives in a module with `register(subparsers)`; that function adds the
parser and sets `func`, which takes the parsed args and returns the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from typing import Any

from tuner import __version__
from tuner.knobs import GROUPS, KNOBS, knob_flag
from tuner.settings import Settings, SettingsError, load

# Modules that register subcommands, in the order `tuner --help` lists them.
COMMAND_MODULES = (
    "tuner.commands.run",
    "tuner.commands.model",
    "tuner.commands.knobs",
    "tuner.commands.bench",
    "tuner.commands.ab",
    "tuner.commands.quality",
    "tuner.commands.tune",
    "tuner.commands.trace",
    "tuner.commands.replay",
    "tuner.commands.budgets",
    "tuner.commands.realism",
    "tuner.commands.serve",
    "tuner.commands.presets",
    "tuner.commands.tui",
)


def given_knobs(args: argparse.Namespace) -> dict[str, Any]:
    """The knob flags given on the command line, by knob name."""
    return {k.name: getattr(args, f"knob_{k.name}") for k in KNOBS
            if getattr(args, f"knob_{k.name}", None) is not None}


def add_knob_flags(p: argparse.ArgumentParser) -> None:
    """--preset plus one flag per knob (values are validated by the settings model)."""
    p.add_argument("--preset", help="preset name or path to a .toml file")
    for group in GROUPS:
        g = p.add_argument_group(f"{group} knobs")
        for k in (k for k in KNOBS if k.group == group):
            text = f"{k.help} [{k.allowed()}; default {k.default!r}; env {k.env}]"
            g.add_argument(knob_flag(k.name), dest=f"knob_{k.name}",
                           metavar=k.type.__name__.upper(),
                           help=text.replace("%", "%%"))  # argparse formats help with %


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Defaults < preset < environment < flags. Raises SettingsError or PresetError."""
    from tuner.presets import resolve

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tuner", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"tuner {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    from tuner.engine.model import ModelError
    from tuner.presets import PresetError

    try:
        return args.func(args) or 0
    except (SettingsError, PresetError, ModelError) as err:  # the user's input: one line
        print(f"tuner: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into head or similar: not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (silences the flush at exit)
        return 0


if __name__ == "__main__":
    sys.exit(main())
