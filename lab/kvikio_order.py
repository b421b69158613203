"""Which order of KvikIO and torch's CUDA set-up crashes a process: `python kvikio_order.py
CASE` runs one case (each in its own process, so a crash ends only it) and prints `CASE ok`.

torch-first: torch's CUDA context and a pinned buffer, then KvikIO's one-byte read, then
             another pinned buffer (what an engine whose context was made first would do)
kvikio-first: KvikIO's read before torch touches CUDA, then a pinned buffer (the order
             `tuner run --io-reader kvikio` took when it crashed)
import-only: KvikIO imported and set to compatibility mode, no read, then a pinned buffer
no-compat:   as kvikio-first without the compatibility-mode setting
settings:    as kvikio-first, then the settings the engine's reader makes (O_DIRECT, three
             pool threads), then a pinned buffer
reader:      the engine's KvikIO reader built as `tuner run` builds it, then a pinned
             buffer the size of the demo's staging ring
"""

import faulthandler
import sys

faulthandler.enable()
case = sys.argv[1]


def pinned(tag: str) -> None:
    import torch

    x = torch.zeros(64, 1 << 20, dtype=torch.uint8, pin_memory=True)
    print(f"{case}: pinned {tag} {x.is_pinned()}", flush=True)


def kvikio_read(compat: bool = True) -> None:
    import kvikio
    import kvikio.defaults

    if compat:
        kvikio.defaults.set("compat_mode", kvikio.CompatMode.ON)
    f = kvikio.CuFile(__file__, "r")
    buf = bytearray(1)
    f.pread(buf, 1, 0).get()
    f.close()
    print(f"{case}: kvikio read {bytes(buf)!r}", flush=True)


if case == "torch-first":
    import torch

    torch.cuda.init()
    pinned("before")
    kvikio_read()
    pinned("after")
elif case == "kvikio-first":
    kvikio_read()
    pinned("after")
elif case == "import-only":
    import kvikio
    import kvikio.defaults

    kvikio.defaults.set("compat_mode", kvikio.CompatMode.ON)
    pinned("after")
elif case == "no-compat":
    kvikio_read(compat=False)
    pinned("after")
elif case == "settings":
    import kvikio.defaults

    kvikio_read()
    kvikio.defaults.set("auto_direct_io_read", True)
    print(f"{case}: direct set", flush=True)
    kvikio.defaults.set("num_threads", 3)
    print(f"{case}: threads set", flush=True)
    pinned("after")
elif case == "reader":
    from tuner.engine.memory.kvikio_reads import KvikioReads

    pool = KvikioReads(3, 1, True, 1 << 20)
    print(f"{case}: reader built", flush=True)
    pinned("after")
    pool.close()
print(f"{case} ok", flush=True)
