"""A decode session: the engine, its settings, a prompt source and the snapshots it publishes.

The decode loop runs in its own thread (`start`) or synchronously (`run`). Settings arrive
as whole validated `Config` objects and are applied at the next token boundary, atomically:
live knobs in place, restart-class knobs (arena size, I/O pool, model) by rebuilding the
engine in place (versions.py). Every snapshot names the settings version that produced it.

Nothing a version brings can stop the loop: whatever building or applying it raises, the
version is refused with that reason and the running engine carries on. A waiting change,
pause or stop makes the current token finish at the host's speed (emulated bandwidths
stop pacing), so it takes effect within a token. A token that fails (an unreadable or
damaged expert, non-finite logits) puts the session in the error state, naming what
failed; resume then rebuilds the engine, so it recovers once the cause is gone.

The rooms: opening.py opens the model and builds the engine, conversation.py walks the
workload and runs each step, session_view.py builds the snapshots; this file runs the loop
and holds the lock they are read under.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterator

import torch

from tuner.config import Config
from tuner.engine.session.conversation import Conversation, take_residency
from tuner.engine.session.opening import Parts, open_parts, trim_heap, use_threads
from tuner.engine.session.session_view import Moment, SlotGains, build_snapshot, expert_view
from tuner.engine.session.versions import Pending, SettingsVersions
from tuner.vocabulary.snapshot import Experts, Snapshot, State
from tuner.vocabulary.workload import Turn, Workload

log = logging.getLogger(__name__)


class Session(SettingsVersions):
    def __init__(self, cfg: Config | None = None, prompt_ids: list[int] | None = None,
                 prompt: str | None = None, workload: Workload | None = None):
        """What it decodes: `workload`, else `prompt_ids` or `prompt` (text, needs the
        model's tokenizer.json), every conversation starting from it, else the workload
        the settings name."""
        super().__init__(cfg or Config())
        given = prompt_ids if prompt_ids else prompt
        if given is not None and workload is None:
            workload = Workload("prompt", ((Turn(given if isinstance(given, str)
                                                 else tuple(given), None),),))
        self.given_workload = workload
        self.unknown_words: list[str] = []  # words of a prompt the tokenizer does not know
        self._reset_pending = False
        self._resets = 0  # counter resets done, for whoever waits on one
        self._paused = False
        self._stop = False
        self._recover = False  # resumed after an error: rebuild before the next token
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        self.seq = 0
        self._gains = SlotGains()
        self._build(self.cfg)

    # -- building ----------------------------------------------------------------------
    def _build(self, cfg: Config) -> None:
        """Opens the model and builds the engine; nothing of the old one is touched until
        both succeeded, so a bad restart-class change leaves the session as it was."""
        parts = open_parts(cfg, self.given_workload)
        old = getattr(self, "engine", None)
        self._swap(parts, cfg)
        if old is not None:
            old.close()  # and with its last reference gone here, its arena is freed
            del old
            trim_heap()
        self.unknown_words += [w for w in parts.unknown if w not in self.unknown_words]

    def _swap(self, parts: Parts, cfg: Config) -> None:
        """Runs `parts` from the start of their workload, with `cfg`'s sampling seed."""
        conversation = Conversation(parts.engine, parts.workload, parts.encoded, cfg.seed)
        with self._lock:  # a snapshot sees the old engine or the new one, never a mix
            self._parts = parts
            self.ckpt, self.engine, self.device = parts.ckpt, parts.engine, parts.device
            self.tokenizer, self.workload = parts.tokenizer, parts.workload
            self.conversation = conversation
            if self._pending or self._paused or self._stop:
                self.engine.hurry.set()  # what waits for the boundary still waits on this one

    def rewind(self) -> None:
        """Back to the start of the workload: its first turn, the sampler's seed, an empty
        output hash; the arena keeps what it holds. Call it between tokens only."""
        self._swap(self._parts, self.cfg)

    # the conversation, as the session's own
    @property
    def pos(self) -> int:
        return self.conversation.pos

    @property
    def conversations(self) -> int:
        return self.conversation.conversations

    @property
    def output_ids(self) -> deque[int]:
        return self.conversation.output_ids

    def token_ids(self, prompt: str | tuple[int, ...]) -> list[int]:
        """A turn's prompt as token ids (text encoded once, when the session was built)."""
        return self.conversation.token_ids(prompt)

    # -- control (any thread) ----------------------------------------------------------
    def _hurry(self) -> None:
        self.engine.hurry.set()

    def _rebuild(self, cfg: Config) -> None:
        self._build(cfg)

    def _apply_live(self, cfg: Config) -> None:
        self.engine.apply_live(cfg)

    def pause(self) -> bool:
        """Decoding stops at the next token boundary; True when it was running."""
        with self._lock:
            was_running = not (self._paused or self.error)
            self._paused = True
            self.engine.hurry.set()
            return was_running

    def resume(self) -> None:
        """Decoding goes on; after an error, on a rebuilt engine."""
        with self._lock:
            self._paused = False
            if self.error is not None:
                self.error, self._recover = None, True
            self._lock.notify_all()

    def reset_counters(self, wait: float = 0.0) -> bool:
        """Zeroes the counters at the next token boundary. With `wait`, blocks until that
        boundary passed, at most `wait` seconds; True once the counters read zero."""
        with self._lock:
            self._reset_pending = True
            done = self._resets + 1
            self._lock.notify_all()
            return self._lock.wait_for(lambda: self._resets >= done, wait) if wait else False

    @property
    def state(self) -> State:
        if self.error:
            return "error"
        return "paused" if self._paused else "running"

    # -- the loop ----------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="tuner-decode", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> bool:
        """Stops the decode thread at its next token boundary and closes the engine; False
        when the thread is still inside a token after `timeout` seconds (a long prefill on
        a loaded machine, a stuck disk): the engine is then left to it, not closed under
        it (a daemon thread: it ends with the process)."""
        with self._lock:
            self._stop = True
            self.engine.hurry.set()
            self._lock.notify_all()
        if self._thread:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return False
        self.engine.close()
        return True

    def _loop(self) -> None:
        use_threads(self.cfg.threads)
        while True:
            with self._lock:
                self._lock.notify_all()  # a token was counted (wait_tokens)
                if self._stop:
                    return
                boundary = self._take_boundary()
                recover, self._recover = self._recover, False
            if recover:
                self._rebuild_after_error()
            # Paused or failed, the loop still applies settings and resets, at once.
            self._apply(boundary)
            with self._lock:
                if self._paused or self.error:
                    take_residency(self.engine)  # nothing moves while paused: any time will do
                    self._lock.wait_for(lambda: self._stop or self._pending is not None
                                        or self._reset_pending or self._recover
                                        or not (self._paused or self.error), 0.5)
                    continue
            try:
                self.conversation.advance(self.cfg)
            except Exception as err:  # shown in the snapshot; the loop waits for resume
                self._fail(err)

    def _fail(self, err: Exception) -> None:
        # One line names the fault; the traceback only when debugging (-v).
        log.error("decoding stopped: %s: %s", type(err).__name__, err,
                  exc_info=log.isEnabledFor(logging.DEBUG))
        with self._lock:
            self.error = f"{type(err).__name__}: {err}"
            self._lock.notify_all()

    def _rebuild_after_error(self) -> None:
        """A failed token can leave bad bytes in the arena and in the KV cache: decoding
        resumes on a new engine built from the current settings."""
        try:
            self._build(self.cfg)
            log.info("resumed on a rebuilt engine after the error")
        except Exception as err:  # the cause is still there: back to the error state
            self._fail(err)

    def _take_boundary(self) -> tuple[Pending | None, bool]:
        """(pending settings, counter reset) at a token boundary, under the lock; from here
        on pacing is due again until something else waits for the next boundary."""
        pending, reset = self._take_pending(), self._reset_pending
        self._reset_pending = False
        if not (self._paused or self._stop):
            self.engine.hurry.clear()
        return pending, reset

    def _apply(self, boundary: tuple[Pending | None, bool]) -> None:
        pending, reset = boundary
        if pending is not None and "threads" in self._apply_version(pending):
            use_threads(self.cfg.threads)
        if reset:
            self.engine.reset_counters()
            with self._lock:
                self._resets += 1
                self._lock.notify_all()

    def run(self, tokens: int, stop: threading.Event | None = None) -> None:
        """Runs `tokens` tokens (prompt and generated) on the calling thread (fewer once
        `stop` is set), then settles speculation."""
        use_threads(self.cfg.threads)
        done = 0
        while done < tokens and not (stop is not None and stop.is_set()):
            with self._lock:
                boundary = self._take_boundary()
            self._apply(boundary)
            done += self.conversation.advance(self.cfg, tokens - done)
        self.engine.drain()

    def forced(self, ids: list[int]) -> Iterator[tuple[int, torch.Tensor, torch.Tensor | None]]:
        """Teacher forcing on the calling thread: feeds `ids` in windows of the context, each
        a new sequence, and yields (the next id, the served logits, the exact logits or None)
        at every position that has a next id; settles speculation at the end."""
        use_threads(self.cfg.threads)
        yield from self.conversation.forced(self.cfg.context, ids)

    # -- snapshots ---------------------------------------------------------------------
    @property
    def tokens(self) -> int:
        return self.engine.counters.tokens

    def wait_tokens(self, n: int, timeout: float | None = None) -> bool:
        """Waits until the decode thread has counted `n` tokens; False when it stopped,
        failed or `timeout` seconds passed first."""
        with self._lock:
            self._lock.wait_for(lambda: self.tokens >= n or self._stop or bool(self.error),
                                timeout)
            return self.tokens >= n

    def experts(self, window: bool) -> Experts:
        """Per (layer, expert), plain data: routings and sync misses over the window or the
        whole run, and the residency map (None until the decode thread has taken one)."""
        return expert_view(self.engine, self.ckpt, window)

    def snapshot(self) -> Snapshot:
        """Plain data: the same dict goes to the websocket, the TUI, --json and /metrics."""
        with self._lock:
            self.seq += 1
            pending = self.version if self.version > self.settled_version else None
            moment = Moment(self.seq, self.state, self.error, self.applied_version, pending,
                            self.cfg, list(self.changes), self.engine, self.ckpt, self.device,
                            self.conversation, self.tokenizer, list(self.unknown_words))
        return build_snapshot(moment, self._gains)
