"""What a user sees when a command does not simply succeed: the base of every user-facing
error (one line naming what was wrong and what is allowed), the command line's exit
statuses (one per kind of outcome, declared once here; `tuner --help` lists them) and the
one place a command's error is printed (`run`: `tuner` and the scripts run through it)."""

from __future__ import annotations

import os
import sys
import textwrap
import traceback
from collections.abc import Callable
from enum import IntEnum


class Exit(IntEnum):
    """How a command ended: its status and what that status means, one per kind."""

    def __new__(cls, status: int, meaning: str) -> Exit:
        member = int.__new__(cls, status)
        member._value_ = status
        member.meaning = meaning
        return member

    meaning: str

    OK = 0, "done (and any rule or quality gate asked for held)"
    REJECTED = 1, ("measured, and the verdict is no: a rule or the quality gate given to an "
                   "A/B (`tuner ab`, the closing A/B of `tuner tune --save-best`) rejects "
                   "an arm")
    USAGE = 2, ("bad input, named in one line with what is allowed: a flag, a knob value, a "
                "preset, a model folder or its files, a trace, a request")
    UNAVAILABLE = 3, ("something the command needs is not there: an optional extra not "
                      "installed, a server that does not answer, a port in use, no CUDA "
                      "device")
    BUG = 70, "an unexpected error, printed with its traceback: a bug, please report it"
    INTERRUPTED = 130, ("stopped by Ctrl-C or SIGTERM; what was measured is printed or "
                        "kept")


def exit_table() -> str:
    """The exit statuses as lines of text (the epilog of `tuner --help`)."""
    return "exit status:\n" + "\n".join(
        textwrap.fill(e.meaning, 80, initial_indent=f"  {e.value:>3}  ",
                      subsequent_indent=" " * 7) for e in Exit)


class TunerError(Exception):
    """A user-facing error; its message is the one line to print, `exit_status` its kind."""

    exit_status = Exit.USAGE


class CommandError(TunerError):
    """A command refuses its input or cannot go on: the message is the line to print
    (the printer adds the command's name), `exit_status` its kind (default: bad input)."""

    def __init__(self, message: str, exit_status: Exit = Exit.USAGE):
        super().__init__(message)
        self.exit_status = exit_status


def run(prog: str, body: Callable[[], int | None]) -> int:
    """Runs a command's `body` and returns its exit status: a TunerError is printed as one
    line, `<prog>: <message>`; Ctrl-C is INTERRUPTED; output piped into `head` that closes
    early is no error; anything else is a bug, printed with its traceback."""
    try:
        return Exit(body() or Exit.OK)
    except TunerError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
    except BrokenPipeError:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (silences the flush at exit)
        return Exit.OK
    except Exception:  # a bug: the traceback says where
        traceback.print_exc()
        print(f"{prog}: an unexpected error (exit status {Exit.BUG.value}); the traceback "
              "above says where", file=sys.stderr)
        return Exit.BUG
