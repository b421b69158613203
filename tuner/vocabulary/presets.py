"""A preset's name, without the store (tuner.presets): what a name may be, the shipped
preset a UI offers as an A/B's arm A, and the error every preset problem is. A request
checks a name here before anything reads a preset file."""

from __future__ import annotations

import re

from tuner.errors import TunerError

BASELINE = "baseline"  # the shipped preset of the engine's defaults: every A/B's usual arm A
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # whole names: use fullmatch


class PresetError(TunerError, ValueError):
    def __init__(self, where: str, message: str, line: int | None = None):
        self.where, self.line = where, line
        at = f"{where}:{line}" if line else where
        super().__init__(f"{at}: {message}")


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or ".." in name:
        raise PresetError(repr(name), "a preset name is 1-64 letters, digits, '.', '_' or '-', "
                          "starting with a letter or digit, with no '..'")
    return name
