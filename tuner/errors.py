"""The base of every error a user sees: one line naming what was wrong and what is allowed."""


class TunerError(Exception):
    """A user-facing error; its message is the one line to print."""
