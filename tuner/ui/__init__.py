"""The Textual terminal UI (`tuner tui`): an engine in this process or a server's."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from textual.dom import DOMNode
    from textual.worker import WorkType

DEFAULT_REFRESH_HZ = 2.0  # repaints a second; the engine pays for each one (tuner.ui.bench)
MAX_REFRESH_HZ = 30.0


class Failed(Enum):
    """An operation whose error the operator has already been shown (TunerApp.attempt)."""

    FAILED = "failed"


FAILED: Literal[Failed.FAILED] = Failed.FAILED


def run_exclusive(node: DOMNode, work: WorkType[None], group: str) -> None:
    """Runs `work` as the one worker of `group` on `node`, cancelling the one before. A
    callable, not a coroutine: an exclusive worker may be cancelled before it starts, and a
    coroutine made for it would never be awaited. (Typed here: from an async method alone a
    checker cannot tell which of run_worker's forms it is given.)"""
    node.run_worker(work, group=group, exclusive=True)
