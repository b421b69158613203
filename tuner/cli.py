"""The `tuner` command line. Knob flags are generated from the knob table.

Each subcommand lives in a module of tuner.commands with `register(parser)`; that function
adds its arguments and sets `func`, which takes the parsed args and returns the exit
status. What commands share (knob flags, settings from flags, JSON output) is in
tuner.commands.args, so no command imports this module. Only the module of the command
being run is imported, and each imports what it runs (torch, the web server, the terminal
UI, Optuna) inside the functions that run it: `tuner --version`, `tuner knobs` or `tuner
presets list` start without loading any of it.

A user's mistake (a bad value, preset, model folder, request) is a TunerError: printed here
as one line, `tuner: <message>`, with exit status 2.

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
from typing import Any

from tuner import __version__
from tuner.commands.args import INTERRUPTED
from tuner.errors import TunerError

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
    "presets": ("tuner.commands.presets", "list, show, diff, save or apply presets"),
    "tui": ("tuner.commands.tui", "the terminal UI: an engine in this process, or --connect "
            "to a running `tuner serve`"),
}


class Parser(argparse.ArgumentParser):
    """argparse's parser that also names the closest flag of the command to a mistyped
    one. Each (sub)parser notes hints for the flags it did not know; the top parser, which
    reports unrecognized arguments, adds the innermost command's hint to its message."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        hints = vars(namespace).setdefault("_flag_hints", {})
        flags = [f for f in self._option_string_actions if f.startswith("--")]
        for arg in extras:
            word = arg.split("=", 1)[0]
            close = difflib.get_close_matches(word, flags, n=1, cutoff=0.6)
            if word.startswith("--") and close and word not in hints:
                hints[word] = close[0]
        self._hints = hints
        return namespace, extras

    def error(self, message: str):
        hints = getattr(self, "_hints", {})
        if message.startswith("unrecognized arguments") and hints:
            message += "; did you mean " + ", ".join(
                f"{hint}" + (f" (for {word})" if len(hints) > 1 else "")
                for word, hint in hints.items()) + "?"
        super().error(message)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with the arguments of the command `argv` runs (the first word that is
    not an option: tuner's own options take no values); every other command is listed
    by name and help only. With argv None, every command's arguments."""
    parser = Parser(prog="tuner", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"tuner {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    sub = parser.add_subparsers(dest="command", required=True)
    word = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    vars(args).pop("_flag_hints", None)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        with sigterm_as_ctrl_c():
            return args.func(args) or 0
    except TunerError as err:  # the user's input: one line
        print(f"tuner: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:  # output piped into head or similar: not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (silences the flush at exit)
        return 0


if __name__ == "__main__":
    sys.exit(main())
