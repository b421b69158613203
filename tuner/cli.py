"""The `tuner` command line. Knob flags are generated from the knob table.

Each subcommand lives in a module of tuner.commands with `register(parser)`; that function
adds its arguments and sets `func`, which takes the parsed args and returns the exit
status. What commands share (knob flags, settings from flags, JSON output) is in
tuner.commands.args, so no command imports this module. Only the module of the command
being run is imported, and each imports what it runs (torch, the web server, the terminal
UI, Optuna) inside the functions that run it: `tuner --version`, `tuner knobs` or `tuner
presets list` start without loading any of it.

A command's failure is a TunerError (a CommandError where the command itself refuses):
printed in one place (`tuner.errors.run`) as one line, `tuner <command>: <message>`, with
the exit status of its kind; the statuses are declared once (`tuner.errors.Exit`) and
listed by `tuner --help`. A mistake in the flags is answered with the command's own usage.

SIGTERM stops a command as Ctrl-C does (a KeyboardInterrupt in the main thread, so every
command's clean-up runs), and both exit with status 130.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from tuner import __version__
from tuner.errors import exit_table, run

# Every command: its module (with `register(parser)`) and its line in `tuner --help`, in
# the order that lists them. Only the module of the command being run is imported.
COMMANDS = {
    "run": ("tuner.commands.run", "decode N tokens without a UI and print the counters"),
    "model": ("tuner.commands.model", "make, quantize or measure a model"),
    "knobs": ("tuner.commands.knobs", "list every knob"),
    "bench": ("tuner.commands.bench", "measure the engine against the machine's limits"),
    "ab": ("tuner.commands.ab", "compare two settings in interleaved matched pairs with a "
           "drift sentinel"),
    "quality": ("tuner.commands.quality", "perplexity of a text at the given settings "
                "beside exact routing's, with KL, top-1 agreement, tokens/s and bytes/token"),
    "tune": ("tuner.commands.tune", "search the knobs for the fastest and leanest settings, "
             "live on one session, every trial paired with a baseline"),
    "trace": ("tuner.commands.trace", "record, import or describe routing traces (.npz)"),
    "replay": ("tuner.commands.replay", "replay a routing trace through a cache policy, "
               "Belady's bound, pinning or read-ahead"),
    "budgets": ("tuner.commands.budgets", "per-layer arena quotas from a trace's hit curves"),
    "realism": ("tuner.commands.realism", "does a decision transfer? routing shape and policy "
                "ranking of traces beside the model's own routing and public logs"),
    "serve": ("tuner.commands.serve", "run the engine with the web control plane"),
    "presets": ("tuner.commands.presets", "list, show, diff, save, export or import presets, "
                "or apply one to a running server"),
    "tui": ("tuner.commands.tui", "the terminal UI: an engine in this process, or --connect "
            "to a running `tuner serve`"),
}


# Stands for a command's knob flags in its usage line, which would otherwise list ~60.
KNOB_FLAGS = argparse.Action(option_strings=[], dest="knob_flags", nargs="?",
                             metavar="--KNOB VALUE ...")


class Usage(argparse.HelpFormatter):
    """A usage line that names the command's own flags and sums up its knob flags."""

    def add_usage(self, usage, actions, groups, prefix=None):
        own = [a for a in actions if not a.dest.startswith("knob_")]
        super().add_usage(usage, own + [KNOB_FLAGS] * (len(own) < len(actions)), groups,
                          prefix)


class Parser(argparse.ArgumentParser):
    """argparse's parser that answers a mistake with the usage of the (sub)command it was
    made in, naming the closest flag of that command to a mistyped one."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        vars(namespace).setdefault("_parser", self)  # the innermost parser sets it first
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        parser = vars(namespace).pop("_parser")
        if extras:
            flags = [f for f in parser._option_string_actions if f.startswith("--")]
            hints = {word: close[0] for arg in extras
                     if (word := arg.split("=", 1)[0]).startswith("--")
                     and (close := difflib.get_close_matches(word, flags, n=1, cutoff=0.6))}
            message = f"unrecognized arguments: {' '.join(extras)}"
            if hints:
                message += "; did you mean " + ", ".join(
                    hint + (f" (for {word})" if len(hints) > 1 else "")
                    for word, hint in hints.items()) + "?"
            parser.error(message)
        namespace._prog = parser.prog
        return namespace


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with the arguments of the command `argv` runs (the first word that is
    not an option: tuner's own options take no values); every other command is listed
    by name and help only. With argv None, every command's arguments."""
    parser = Parser(prog="tuner", description=__doc__.splitlines()[0], epilog=exit_table(),
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tuner {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    sub = parser.add_subparsers(dest="command", required=True)
    word = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_, formatter_class=Usage)
        if word is None or word == name:
            importlib.import_module(module).register(p)
    return parser


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """Within: SIGTERM raises KeyboardInterrupt in the main thread, as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may handle signals
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def script() -> NoReturn:
    """The `tuner` program: `main`, then the process ends at once. Every command has cleaned
    up by then (servers and sessions closed, files written and flushed); what is left is
    the interpreter's own teardown, which collects a loaded model's heap object by object
    and waits for worker processes: 4-12 s after `tuner serve` had stopped, on a machine
    at load 9-14."""
    status = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # output piped into head or similar: not an error
        pass
    sys.stderr.flush()
    os._exit(status)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    prog = vars(args).pop("_prog")
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:  # a line per request is debugging, not news
        logging.getLogger("httpx").setLevel(logging.WARNING)
    with sigterm_as_ctrl_c():
        return run(prog, lambda: args.func(args))


if __name__ == "__main__":
    script()
