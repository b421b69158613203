"""The backend of an engine in this process: each operation is the Controller's method of
the same name, run on a worker thread.

The Controller's calls block (a change waits for the next token boundary, a restart-class
change rebuilds the arena), so the event loop only awaits them. The session's lifetime
belongs to whoever made it, not to the backend.

The UI and the decode thread share the GIL. A thread that wants it waits up to the
interpreter's switch interval (5 ms by default) for its holder to let go, and a repaint
holds it for about 10 ms at a time; at 1 ms the engine keeps decoding in between. On the
64-layer model at 2 Hz, the Layers screen cost the engine 8-10 % of its tokens per second
at 5 ms and 5-6 % at 1 ms (`tuner bench --only ui`).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from tuner.control.api import Backend, Operation
from tuner.control.controller import GIL_SWITCH_S, Controller
from tuner.control.errors import as_backend_error
from tuner.errors import TunerError
from tuner.vocabulary.snapshot import Snapshot


class EmbeddedBackend(Backend):
    where = "embedded"

    def __init__(self, controller: Controller):
        self.controller = controller
        self._switch_interval = sys.getswitchinterval()

    async def open(self) -> None:
        sys.setswitchinterval(GIL_SWITCH_S)  # while the app runs: see above

    async def close(self) -> None:
        sys.setswitchinterval(self._switch_interval)

    def latest(self) -> Snapshot | None:
        # The session builds a snapshot on request, so the newest is always the one taken.
        return self.controller.snapshot()

    async def call(self, operation: Operation, arguments: dict[str, Any]) -> Any:
        method = getattr(self.controller, operation.name)
        try:
            return await asyncio.to_thread(method, **arguments)
        except TunerError as err:
            raise as_backend_error(err) from None
