"""What a user names, read safely: paths (a model folder, a routing trace, a workload file)
and the JSON inside such files.

A path is checked against the system's limits before any system call sees it, and looked
at with one `stat` whose failures become a `PathError` naming the path: an over-long name
or an unreadable folder is a one-line answer, never an OSError out of `Path.is_file()`
(which raises for those). JSON nested deeper than Python's parser can recurse is a
JSONDecodeError like any other malformed JSON, not a RecursionError.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

from tuner.errors import TunerError

# Linux's limits: a path of PATH_MAX bytes with its terminating NUL, a name of NAME_MAX.
PATH_MAX = 4096
NAME_MAX = 255
ALLOWED = f"a path of at most {PATH_MAX - 1} bytes, no name in it over {NAME_MAX}"
# What a path that is not there reads as; anything else a stat raises is reported.
_ABSENT = (errno.ENOENT, errno.ENOTDIR)


class PathError(TunerError, ValueError):
    """A path no file can have, or one the system refused to look at; the message names
    it and says why."""


def shown(path: str | os.PathLike, limit: int = 80) -> str:
    """A path as a message quotes it: an over-long one is cut in the middle."""
    text = repr(str(path))
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2:]}"


def check(text: str | os.PathLike) -> Path:
    """`text` as a Path; PathError when no system call could take it."""
    raw = os.fsencode(text)
    if b"\0" in raw:
        raise PathError(f"{shown(text)} holds a NUL character; allowed: {ALLOWED}, "
                        "without NUL")
    if len(raw) >= PATH_MAX:
        raise PathError(f"{shown(text)} is {len(raw)} bytes long; allowed: {ALLOWED}")
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        raise PathError(f"{shown(text)} has a name of {len(longest)} bytes; allowed: "
                        f"{ALLOWED}")
    return Path(os.fsdecode(raw))


def kind(path: str | os.PathLike) -> str:
    """"file", "folder", "other" (a device, a socket, ...) or "missing"; PathError for a
    path that cannot be looked at (too long, no permission, a loop of links)."""
    path = check(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        if err.errno in _ABSENT:
            return "missing"
        raise PathError(f"{shown(path)} cannot be looked at: {err.strerror}") from None
    if stat.S_ISREG(mode):
        return "file"
    return "folder" if stat.S_ISDIR(mode) else "other"


def loads(text: str | bytes) -> Any:
    """json.loads; a JSONDecodeError, as for any malformed JSON, where the text nests deeper
    than the parser can recurse."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("arrays or objects nested too deeply", "", 0) from None
