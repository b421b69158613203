"""The Textual terminal UI (`tuner tui`): an engine in this process or a server's."""

from enum import Enum
from typing import Literal

DEFAULT_REFRESH_HZ = 2.0  # repaints a second; the engine pays for each one (tuner.ui.bench)
MAX_REFRESH_HZ = 30.0


class Failed(Enum):
    """An operation whose error the operator has already been shown (TunerApp.attempt)."""

    FAILED = "failed"


FAILED: Literal[Failed.FAILED] = Failed.FAILED
