"""The control plane's errors, and how each user-facing error is answered: one table gives
the HTTP status the server answers with, and the same table tells a backend which error
to raise, so an operation fails alike in this process and across the network.

Every class here derives from TunerError: its message is the one line to show. The errors
of the rooms below that an operation passes on (a settings change's, a preset's) are named
here too, so a view catches them from the control plane, the only room it sees.
"""

from __future__ import annotations

from collections.abc import Mapping

from tuner.errors import Exit, TunerError
from tuner.presets import (
    PresetError,
    PresetExists,
    PresetNotFound,
    PresetReadOnly,
    PresetWriteError,
)
from tuner.settings import SettingsError

__all__ = ["ApplyTimeout", "BackendError", "Conflict", "JobBusy", "PresetError",
           "PresetExists", "PresetNotFound", "PresetReadOnly", "PresetWriteError", "Rejected",
           "SettingsError", "Unreachable", "as_backend_error", "backend_error", "http_status"]


class ApplyTimeout(TunerError, RuntimeError):
    """A settings change was withdrawn before the engine took it up: nothing was applied."""


class JobBusy(TunerError, RuntimeError):
    """A background job (an A/B or a tune) is running already: nothing was started."""


class BackendError(TunerError):
    """An operation of a backend failed; the message is meant for the operator."""


class Unreachable(BackendError):
    """No server answers at the address: nothing was sent."""

    exit_status = Exit.UNAVAILABLE


class Rejected(BackendError):
    """Values were refused (a settings change, a request's fields); nothing was applied.

    `problems` maps a knob name (or "settings" for a rule across knobs, or a request's
    field) to the engine's own message, which names it, the value and what is allowed."""

    def __init__(self, problems: Mapping[str, str]):
        self.problems = dict(problems)
        super().__init__("; ".join(self.problems.values()))


class Conflict(BackendError):
    """The request clashes with what is there: a user preset a save would replace (saving
    again with `overwrite` replaces it), or a job running already."""


# The most specific class first: a subclass takes its own status.
_STATUS: tuple[tuple[type[TunerError], int], ...] = (
    (PresetNotFound, 404),
    (PresetReadOnly, 403),
    (PresetExists, 409),
    (JobBusy, 409),
    (ApplyTimeout, 503),
    (SettingsError, 422),
    (PresetError, 422),  # a preset file that cannot be used: its message names file and line
)


def http_status(err: TunerError) -> int:
    """The status the server answers `err` with; 400 for any other user error."""
    if isinstance(err, PresetWriteError):
        return 507 if err.full else 403
    return next((status for cls, status in _STATUS if isinstance(err, cls)), 400)


def backend_error(status: int, message: str,
                  problems: Mapping[str, str] | None = None) -> BackendError:
    """What a backend raises for an error answered with `status`: Rejected when it names
    problems, Conflict for 409, else BackendError."""
    if problems is not None:
        return Rejected(problems)
    return (Conflict if status == 409 else BackendError)(message)


def as_backend_error(err: TunerError) -> BackendError:
    """A controller's error as a backend raises it (see `backend_error`)."""
    if isinstance(err, BackendError):
        return err
    problems = err.problems if isinstance(err, SettingsError) else None
    return backend_error(http_status(err), str(err), problems)
