"""What a user names, read safely: paths (a model folder, a routing trace, a workload file),
the files they name, how much of each is read, and the JSON inside such files.

A path is checked against the system's limits before any system call sees it, and looked
at with one `stat` whose failures become a `PathError` naming the path: an over-long name
or an unreadable folder is a one-line answer, never an OSError out of `Path.is_file()`
(which raises for those).

Every file a user names is opened by `open_file`: only a regular file is read (a device
such as /dev/zero, a fifo or a folder is refused before the first read, and opening never
waits on a fifo), and never more than the limit of its kind (`Limit`, the table below):
its size is checked when it is opened and the reads stop there, so a file that grows
while it is read is refused too. Line formats are read a bounded line at a time
(`read_lines`). What a reader builds from what it read is its own to bound; each states
its multiple of the bytes read (docs/security.md lists them).

JSON that Python's parser cannot take (nested deeper than it can recurse, an integer of
more digits than Python converts, bytes that are not UTF-8) is a JSONDecodeError like any
other malformed JSON, never a RecursionError or a ValueError of another kind.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tuner.errors import TunerError

# Linux's limits: a path of PATH_MAX bytes with its terminating NUL, a name of NAME_MAX.
PATH_MAX = 4096
NAME_MAX = 255
ALLOWED = f"a path of at most {PATH_MAX - 1} bytes, no name in it over {NAME_MAX}"
# What a path that is not there reads as; anything else a stat raises is reported.
_ABSENT = (errno.ENOENT, errno.ENOTDIR)


class PathError(TunerError, ValueError):
    """A path no file can have, one the system refused to look at, or a file of a kind or
    size that is not read or cannot be written; the message names it and says why, and
    `why` says it without the path, for a reader whose own error names the file."""

    def __init__(self, message: str, why: str | None = None):
        super().__init__(message)
        self.why = why or message

    @classmethod
    def of(cls, path: str | os.PathLike, why: str) -> PathError:
        return cls(f"{shown(path)}: {why}", why)


class Missing(PathError):
    """No file at the path."""


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
    than the parser can recurse, holds an integer of more digits than Python converts, or
    is bytes that are not UTF-8."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("arrays or objects nested too deeply", "", 0) from None
    except json.JSONDecodeError:
        raise
    except ValueError as err:  # an integer of over 4,300 digits, bytes that are not UTF-8
        why = "not UTF-8" if isinstance(err, UnicodeDecodeError) else str(err).split(":")[0]
        raise json.JSONDecodeError(why, "", 0) from None


def brief(value: Any, limit: int = 60) -> str:
    """repr(value) cut to `limit` characters, for a message that quotes what a file held."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 5]}...{text[-1]}"


# -- the files a user names: what is read of each ------------------------------------------
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def _size(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n:,} bytes"


@dataclass(frozen=True)
class Limit:
    """The most tuner reads of one kind of file: `size` bytes, and for a line format at most
    `line` bytes a line."""

    kind: str  # how a message names the file
    size: int
    line: int | None = None

    def allowed(self) -> str:
        article = "an" if self.kind[0] in "aeiou" else "a"
        text = f"{article} {self.kind} is a regular file of at most {_size(self.size)}"
        return text + (f", each line at most {_size(self.line)}" if self.line else "")


# Each well above the largest real file of its kind (route logs of tens to a few hundred
# MiB, a Gemma tokenizer.json of 33 MiB, a DeepSeek-V3 safetensors index of 9 MiB, configs
# and presets of a few KiB), and small enough that what a reader builds from it fits in
# memory: docs/security.md gives each reader's measured multiple (JSON parses to at most
# 25 times its bytes, an array of empty objects being the worst case).
ROUTE_LOGS = Limit("route log", 512 * MiB, line=1 * MiB)  # all the files of an import
WORKLOAD = Limit("workload file", 16 * MiB, line=1 * MiB)
PRESET = Limit("preset file", 64 * KiB)
ENV_FILE = Limit("env file", 64 * KiB)
BUDGETS = Limit("budgets file", 1 * MiB)
TEXT = Limit("text file", 16 * MiB)
TRACE = Limit("trace", 4 * GiB)  # the .npz, and its arrays together once inflated
TRACE_SLOTS = 1 << 26  # routed slots (tokens x layers x k) of a trace: 256 MiB of ids
TRACE_META = 16 * MiB  # a trace's meta, as stored (4 bytes a character)
MODEL_CONFIG = Limit("model config.json", 1 * MiB)
SAFETENSORS_INDEX = Limit("safetensors index", 16 * MiB)
SAFETENSORS = Limit("safetensors shard", 1 << 40)  # read a tensor at a time, not whole
SAFETENSORS_HEADER = 32 * MiB  # a shard's JSON header (the library allows 100 MB)
TOKENIZER = Limit("tokenizer.json", 64 * MiB)
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a fifo"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def regular(path: str | os.PathLike, limit: Limit) -> int:
    """The size of `path`, a regular file within `limit` (one stat); PathError otherwise."""
    with open_file(path, limit) as f:
        return os.fstat(f.fileno()).st_size


def open_file(path: str | os.PathLike, limit: Limit) -> IO[bytes]:
    """`path` open for reading, once it was found to be a regular file of at most
    `limit.size` bytes; PathError naming it and what is allowed otherwise. It is opened
    without waiting (a fifo would block an open until a writer came) and looked at through
    the open descriptor, so what is read is what was checked."""
    path = check(path)
    try:
        # the file object owns the descriptor from its creation: an interrupt landing after
        # it (Ctrl-C, SIGTERM) closes it once, where closing a bare descriptor that a file
        # object had taken closed it twice, the second time a number reused by another file
        f = open(path, "rb", opener=_without_waiting)
    except IsADirectoryError:  # the file object refuses a folder itself
        raise PathError.of(path, f"a folder, not a regular file; {limit.allowed()}") from None
    except OSError as err:
        if err.errno in _ABSENT:
            raise Missing.of(path, f"no such file; {limit.allowed()}") from None
        raise PathError.of(path, f"cannot be opened ({err.strerror}); {limit.allowed()}") \
            from None
    try:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            what = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
            raise PathError.of(path, f"{what}, not a regular file; {limit.allowed()}")
        if info.st_size > limit.size:
            raise PathError.of(path, f"{info.st_size:,} bytes, over the limit; "
                               f"{limit.allowed()}")
        os.set_blocking(f.fileno(), True)
        return f
    except BaseException:
        f.close()
        raise


def _without_waiting(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NONBLOCK)


def read_bytes(path: str | os.PathLike, limit: Limit) -> bytes:
    """The whole of `path`, a regular file within `limit`; PathError otherwise."""
    with open_file(path, limit) as f:
        data = f.read(limit.size + 1)
    if len(data) > limit.size:
        raise PathError.of(path, f"grew past {_size(limit.size)} while it was read; "
                           f"{limit.allowed()}")
    return data


def read_text(path: str | os.PathLike, limit: Limit) -> str:
    """`path` as UTF-8 text; PathError naming the first byte that is not."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise PathError.of(path, f"line {line} is not UTF-8 text ({err.reason} at byte "
                           f"{err.start:,}); a {limit.kind} is UTF-8 text") from None


def read_lines(path: str | os.PathLike, limit: Limit) -> Iterator[tuple[int, bytes]]:
    """(number from 1, bytes) of each line of `path`, its newline left on; PathError at a
    line over `limit.line` bytes or once more than `limit.size` bytes were read. Only one
    line is held at a time."""
    assert limit.line is not None, limit
    with open_file(path, limit) as f:
        total, number = 0, 0
        while line := f.readline(limit.line + 1):
            number += 1
            total += len(line)
            if len(line) > limit.line and not line.endswith(b"\n"):
                raise PathError.of(path, f"line {number} is longer than "
                                   f"{_size(limit.line)}; {limit.allowed()}")
            if total > limit.size:
                raise PathError.of(path, f"grew past {_size(limit.size)} while it was "
                                   f"read; {limit.allowed()}")
            yield number, line


def within(paths: list[Path], limit: Limit) -> None:
    """PathError unless `paths` together are within `limit` (each a regular file)."""
    total = 0
    for path in paths:
        total += regular(path, limit)
        if total > limit.size:
            raise PathError.of(path, f"with the {len(paths) - 1} file(s) read with it, over "
                               f"{_size(limit.size)}; {limit.allowed()}, all the files read "
                               "together")


def write_atomic(path: str | os.PathLike, write: Callable[[IO[bytes]], None]) -> None:
    """Writes `path` through `write(file)` into a new file beside it that replaces it once
    whole, so a failed write (a full disk) leaves no half file; PathError naming the path
    and the system's reason when it cannot be written, or when something other than a
    regular file (a device, a folder) is there."""
    path = check(path)
    if kind(path) not in ("file", "missing"):
        raise PathError.of(path, "cannot be written: it is not a regular file")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:  # the mode a plain open gives (0o666 less the umask), unlike mkstemp's 0o600
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as err:
        why = "no such folder" if err.errno in _ABSENT else err.strerror
        raise PathError.of(path, f"cannot be written: {shown(path.parent)}: {why}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except OSError as err:
        os.unlink(tmp)
        raise PathError.of(path, f"cannot be written: {err.strerror or err}") from None
    except BaseException:
        os.unlink(tmp)
        raise
