"""`tuner run` with KvikIO's availability probe reading its one byte into a 1 MiB buffer
instead of a one-byte bytearray: if a read through KvikIO writes past a small buffer (a
page-sized read behind a one-byte request), the probe corrupted the heap and the crash
that followed was wherever Python next touched it. Arguments: those of `tuner run`."""

import faulthandler
import functools
import sys

faulthandler.enable()

from tuner.engine.memory import kvikio_reads  # noqa: E402


@functools.cache
def probe() -> str | None:
    kvikio = kvikio_reads._kvikio()
    f = kvikio.CuFile(kvikio_reads.__file__, "r")
    try:
        f.pread(bytearray(1 << 20), 1, 0).get()
    finally:
        f.close()
    return None


kvikio_reads.problem = probe
sys.argv = ["tuner", "run", *sys.argv[1:]]
from tuner.cli import script  # noqa: E402

script()
