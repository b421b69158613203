"""Where settings become a running engine: Settings -> Config -> Session -> Store ->
Controller, in one place, with one rule for a model that cannot be opened.

`tuner serve`, `tuner tui`, `tuner run`, `tuner model stats`, the documentation's pictures
and the benchmarks of the page and the terminal UI build their session here, so a bad model
folder ends each of them alike: the engine's own one-line error (a TunerError: a missing
folder, a bad config.json, no CUDA device) as it is, and a file the engine could not read
or take (OSError, ValueError) as a ModelError naming the model. The runners below the
control plane (an A/B's arms, a tune's workers) build their sessions from a Config of their
own and report failures as their runs' results.
"""

from __future__ import annotations

from tuner.control.controller import Controller
from tuner.engine.session.session import Session
from tuner.errors import TunerError
from tuner.presets import Store
from tuner.settings import Settings, to_config
from tuner.vocabulary.model_config import ModelError


def open_session(settings: Settings, prompt_ids: list[int] | None = None,
                 prompt: str | None = None) -> Session:
    """The session `settings` describe (decoding `prompt_ids` or `prompt` when given, else
    the workload they name), built on this thread and not started."""
    try:
        return Session(to_config(settings), prompt_ids=prompt_ids, prompt=prompt)
    except TunerError:
        raise
    except (OSError, ValueError) as err:
        raise ModelError(f"{settings.model or 'the demo model'} cannot be opened: "
                         f"{err}") from None


def open_controller(settings: Settings, store: Store | None = None,
                    start: bool = True) -> Controller:
    """A Controller over the session `settings` describe, with `store` (the user's presets
    when None, cleaned of what interrupted saves left), its session started unless
    `start` is False."""
    session = open_session(settings)
    store = store or Store()
    store.clean()
    controller = Controller(session, settings, store)
    if start:
        session.start()
    return controller
