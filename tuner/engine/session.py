"""A decode session: the engine, its settings, a prompt source and the snapshots it publishes.

The decode loop runs in its own thread (`start`) or synchronously (`run`). Settings arrive
as whole validated `Config` objects and are applied at the next token boundary, atomically:
live knobs in place, restart-class knobs (arena size, I/O pool, model) by rebuilding the
engine in place. Every snapshot names the settings version that produced it.

Nothing a version brings can stop the loop: whatever building or applying it raises, the
version is refused with that reason and the running engine carries on. A waiting change,
pause or stop makes the current token finish at the host's speed (emulated bandwidths
stop pacing), so it takes effect within a token. A token that fails (an unreadable or
damaged expert, non-finite logits) puts the session in the error state, naming what
failed; resume then rebuilds the engine, so it recovers once the cause is gone.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import numpy as np
import torch

from tuner import __version__
from tuner.engine import synth
from tuner.engine.budgets import by_layer, slot_gains
from tuner.engine.checkpoint import Checkpoint
from tuner.engine.decode import Engine
from tuner.engine.model_config import ModelError
from tuner.engine.snapshot import Experts, Snapshot
from tuner.engine.trace_format import Trace
from tuner.engine.verify import find_bad_expert
from tuner.engine.workload import Turn, Workload, WorkloadError
from tuner.engine.workload import load as load_workload
from tuner.errors import TunerError
from tuner.knobs import BY_NAME, Config, config_dict

log = logging.getLogger(__name__)

SCHEMA = 1
RESTART = frozenset(k.name for k in BY_NAME.values() if k.restart)
MAX_CHANGES = 200
TEXT_TOKENS = 200  # generated tokens of the current conversation kept as text


class DeviceError(TunerError, ValueError):
    """A compute device this machine does not have."""


def pick_device(name: str = "auto") -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        knob = BY_NAME["device"]
        raise DeviceError(f"{knob.label} = 'cuda' is not allowed here: torch "
                          "sees no CUDA device; allowed here: auto, cpu")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def load_tokenizer(folder: Path):
    """The model's tokenizers.Tokenizer, or None when it ships no tokenizer.json."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path))
    except Exception as err:  # the library raises plain Exception for a bad file
        raise ModelError(f"{path} is not a tokenizer file the tokenizers library reads "
                         f"({err}); remove it to run the model without text") from None


def encode(tokenizer, text: str) -> tuple[list[int], list[str]]:
    """(token ids of `text`, the words of it that became the unknown token)."""
    encoding = tokenizer.encode(text)
    unk = getattr(tokenizer.model, "unk_token", None)
    unk_id = tokenizer.token_to_id(unk) if unk else None
    unknown = [text[start:end] for i, (start, end) in zip(encoding.ids, encoding.offsets)
               if unk_id is not None and i == unk_id]
    return encoding.ids, unknown


TORCH_THREADS = torch.get_num_threads()  # torch's own default, before anything changed it


def use_threads(n: int) -> None:
    """`n` intra-op threads for torch work on the calling thread (0: torch's default).
    OpenMP keeps the count per thread, so the thread that decodes sets it itself."""
    torch.set_num_threads(n or TORCH_THREADS)


def trim_heap() -> None:
    """Gives the memory a replaced engine's many smaller tensors leave in the C heap back to
    the system: glibc keeps freed blocks for reuse, and RSS would stay about 10 % higher
    after a few rebuilds."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator decides
        pass


def model_folder(cfg: Config) -> Path:
    return Path(cfg.model) if cfg.model else synth.ensure()


class Session:
    def __init__(self, cfg: Config | None = None, prompt_ids: list[int] | None = None,
                 prompt: str | None = None, workload: Workload | None = None):
        """What it decodes: `workload`, else `prompt_ids` or `prompt` (text, needs the
        model's tokenizer.json), every conversation starting from it, else the workload
        the settings name."""
        self.cfg = cfg or Config()
        given = prompt_ids if prompt_ids else prompt
        if given is not None and workload is None:
            workload = Workload("prompt", ((Turn(given if isinstance(given, str)
                                                 else tuple(given), None),),))
        self.given_workload = workload
        self.unknown_words: list[str] = []  # words of a prompt the tokenizer does not know
        self.version = 1  # the latest version submitted
        self.applied_version = 1  # the version the engine runs
        self.settled_version = 1  # the latest version applied, refused or withdrawn
        self._lock = threading.Condition()
        self._pending: tuple[Config, int] | None = None
        self._reset_pending = False
        self._resets = 0  # counter resets done, for whoever waits on one
        self._paused = False
        self._stop = False
        self._recover = False  # resumed after an error: rebuild before the next token
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        self.changes: deque[dict] = deque(maxlen=MAX_CHANGES)
        self.seq = 0
        self._gains: tuple[tuple, list[float | None]] = ((), [])
        self._build(self.cfg)

    # -- building ----------------------------------------------------------------------
    def _build(self, cfg: Config) -> None:
        """Opens the model and builds the engine; nothing of the old one is touched until
        both succeeded, so a bad restart-class change leaves the session as it was."""
        device = pick_device(cfg.device)
        ckpt = Checkpoint(model_folder(cfg))
        tokenizer = load_tokenizer(ckpt.folder)
        mc = ckpt.config
        topics = ckpt.raw_config.get("tuner_recipe", {}).get("topics", 1)
        workload = self.given_workload or load_workload(cfg.workload, cfg.seed,
                                                        mc.vocab_size, topics)
        if tokenizer is None and any(isinstance(t.prompt, str)
                                     for c in workload.conversations for t in c):
            raise WorkloadError(f"workload {workload.name}: {ckpt.folder} has no "
                                "tokenizer.json, so text prompts cannot be encoded; give "
                                "prompt ids instead")
        engine = Engine(ckpt, cfg, device)
        old = getattr(self, "engine", None)
        with self._lock:  # a snapshot sees the old engine or the new one, never a mix
            self.ckpt, self.engine, self.device = ckpt, engine, device
            if self._pending or self._paused or self._stop:
                engine.hurry.set()  # what waits for the boundary still waits on this one
        if old is not None:
            old.close()  # and with its last reference gone here, its arena is freed
            del old
            trim_heap()
        self.tokenizer = tokenizer
        self.workload = workload
        self._encoded: dict[str, list[int]] = {}  # every text prompt, encoded once
        for text in {t.prompt for c in workload.conversations for t in c
                     if isinstance(t.prompt, str)}:
            self._encoded[text], unknown = encode(tokenizer, text)
            self.unknown_words += [w for w in unknown if w not in self.unknown_words]
        self.rewind(cfg)

    def rewind(self, cfg: Config | None = None) -> None:
        """Back to the start of the workload: its first turn, the sampler's seed, an empty
        output hash; the arena keeps what it holds. Call it between tokens only."""
        cfg = cfg or self.cfg
        self._turns = self.workload.turns()
        self._turn: Turn | None = None
        self.turn_index = 0  # of the current turn in its conversation
        self._generated = 0  # tokens generated in the current turn
        self._gen = torch.Generator().manual_seed(cfg.seed)
        self._hash = hashlib.sha256()
        self._feed: deque[int] = deque()
        self._logits: torch.Tensor | None = None
        self.pos = 0
        self.conversations = 0
        self.output_ids: deque[int] = deque(maxlen=4096)
        self._conversation: tuple[list[int], deque[int]] = ([], deque(maxlen=TEXT_TOKENS))
        self._resident = self.engine.resident_counts()

    # -- control (any thread) ----------------------------------------------------------
    def submit(self, cfg: Config) -> int:
        """Queues whole new settings; returns the version they will carry."""
        with self._lock:
            self.version += 1
            self._pending = (cfg, self.version)
            self.engine.hurry.set()
            self._lock.notify_all()
            return self.version

    def wait_applied(self, version: int, timeout: float = 30.0) -> bool:
        """Until settings `version` was applied or refused (see `rejection`); False when
        `timeout` seconds passed first."""
        with self._lock:
            return self._lock.wait_for(lambda: self.settled_version >= version, timeout)

    def withdraw(self, version: int) -> bool:
        """Takes back settings `version` if the loop has not taken it up yet."""
        with self._lock:
            if self._pending is None or self._pending[1] != version:
                return False
            self._pending = None
            self.settled_version = version
            self._lock.notify_all()
            return True

    def settings_state(self) -> tuple[int, Config]:
        """(version, settings) of what the engine runs, read together."""
        with self._lock:
            return self.applied_version, self.cfg

    def rejection(self, version: int) -> str | None:
        """Why settings `version` was not applied, or None."""
        with self._lock:
            return next((c["rejected"] for c in self.changes if c["version"] == version), None)

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
    def state(self) -> str:
        if self.error:
            return "error"
        return "paused" if self._paused else "running"

    # -- the loop ----------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="tuner-decode", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        with self._lock:
            self._stop = True
            self.engine.hurry.set()
            self._lock.notify_all()
        if self._thread:
            self._thread.join(timeout)
        self.engine.close()

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
                    self._take_residency()  # nothing moves while paused: any time will do
                    self._lock.wait_for(lambda: self._stop or self._pending is not None
                                        or self._reset_pending or self._recover
                                        or not (self._paused or self.error), 0.5)
                    continue
            try:
                self._token()
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

    def _take_boundary(self) -> tuple[tuple[Config, int] | None, bool]:
        """(pending settings, counter reset) at a token boundary, under the lock; from here
        on pacing is due again until something else waits for the next boundary."""
        pending, reset = self._pending, self._reset_pending
        self._pending, self._reset_pending = None, False
        if not (self._paused or self._stop):
            self.engine.hurry.clear()
        return pending, reset

    def _apply(self, boundary) -> None:
        pending, reset = boundary
        if pending is not None:
            cfg, version = pending
            old = self.cfg
            changed = {f.name: [getattr(old, f.name), getattr(cfg, f.name)]
                       for f in fields(cfg) if getattr(old, f.name) != getattr(cfg, f.name)}
            rebuilt, rejected = bool(RESTART & changed.keys()), None
            try:
                if rebuilt:
                    self._build(cfg)
                else:
                    self.engine.apply_live(cfg)
            except Exception as err:  # whatever it was, the running engine stays
                rejected = f"{type(err).__name__}: {err}"
                log.error("settings version %d refused, kept the running engine: %s",
                          version, rejected)
            with self._lock:
                if rejected is None:
                    self.cfg, self.applied_version = cfg, version
                self.settled_version = version
                self.changes.append({"version": version, "token": self.tokens,
                                     "changed": changed, "rebuilt": rebuilt and not rejected,
                                     "rejected": rejected})
                self._lock.notify_all()
            if "threads" in changed and rejected is None:
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
            done += self._token(tokens - done)
        self.engine.drain()

    def _token(self, budget: int | None = None) -> int:
        """One step: the waiting prompt tokens (up to `budget`) prefilled together, or one
        token generated; returns the tokens it ran."""
        eng = self.engine
        # Driven by a trace, conversations start where the trace's sequences do; a
        # sequence longer than the context restarts the model's text only.
        sequence = eng.routing.sequence_start if eng.routing else None
        if sequence or not self._feed:
            if sequence or self._turn_done():
                self._next_turn(sequence is not False, force_new=bool(sequence))
            else:
                tok = self._sample(self._logits)
                self.output_ids.append(tok)
                self._conversation[1].append(tok)
                self._generated += 1
                self._step([tok], "decode")
                return 1
        # a trace routes token by token, so its prompts go one token a step
        n = 1 if eng.routing else min(len(self._feed), budget or len(self._feed))
        self._step([self._feed.popleft() for _ in range(n)], "prefill")
        return n

    def _step(self, ids: list[int], phase: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Runs `ids` from the current position, one decoded token or prompt tokens: (the
        last one's logits on the host, the quality probe's exact logits on a decoded token it
        samples, else None). The probe's exact pass runs before the timed span and is scored
        after it."""
        eng = self.engine
        exact = eng.exact_first(ids[0], self.pos) if phase == "decode" else None
        t0 = time.perf_counter()
        if phase == "decode":
            logits = eng.step(ids[0], self.pos)
        else:
            logits = eng.prefill(ids, self.pos)
        host = logits.detach().cpu()
        if not torch.isfinite(host).all():
            raise FloatingPointError(self._why_not_finite())
        self._logits = logits
        self.pos += len(ids)
        self._resident = eng.resident_counts()
        seconds = time.perf_counter() - t0
        if exact is not None:
            eng.quality.score(exact, host)
        eng.counters.end_token(seconds, len(ids), phase,
                               prompts=int(phase == "prefill" and not self._feed))
        self._take_residency()
        for tok in ids:
            self._hash.update(tok.to_bytes(4, "little"))
        self._hash.update(host.numpy().tobytes())
        return host, exact

    def forced(self, ids: list[int]) -> Iterator[tuple[int, torch.Tensor, torch.Tensor | None]]:
        """Teacher forcing on the calling thread: feeds `ids` in windows of the context, each
        a new sequence, and yields (the next id, the served logits, the exact logits or None)
        at every position that has a next id; settles speculation at the end."""
        use_threads(self.cfg.threads)
        span = self.cfg.context
        for start in range(0, len(ids) - 1, span):
            window = ids[start:start + span + 1]
            self.engine.reset_sequence()
            self.pos = 0
            for tok, nxt in zip(window, window[1:]):
                served, exact = self._step([tok], "decode")
                yield nxt, served, exact
        self.engine.drain()

    def _turn_done(self) -> bool:
        turn = self._turn
        return (self._logits is None or self.pos >= self.cfg.context or turn is None
                or (turn.max_tokens is not None and self._generated >= turn.max_tokens))

    def _why_not_finite(self) -> str:
        """Names the expert whose bytes on disk made this token's logits NaN or inf, when
        one of the experts it routed to has non-finite values."""
        eng = self.engine
        keys = [(l, e) for l, sel in enumerate(eng.prev_sel) for e in sel or ()]
        found = find_bad_expert(self.ckpt, keys)
        what = found or ("no expert this token routed to holds non-finite values on disk: "
                         "the dense weights or an arena copy do")
        return (f"the logits of token {self.tokens + 1} are not finite (NaN or inf): {what}; "
                "verify_reads = 1 checks every expert read before it is used")

    def _take_residency(self) -> None:
        """The residency map, at a token boundary, when a reader asked for one."""
        per_expert = self.engine.counters.per_expert
        if per_expert.wants_residency:
            per_expert.set_residency(self.engine.resident_map(), self.tokens)

    def _next_turn(self, sequence: bool = True, force_new: bool = False) -> None:
        """Feeds the workload's next prompt: a new conversation at its first turn (or when
        the prompt would not fit the context), else after the previous turn's tokens.
        `sequence`: a new conversation is a new routing sequence too (the predictors start
        over)."""
        index, turn = next(self._turns)
        ids = self.token_ids(turn.prompt)[: max(1, self.cfg.context - 1)]
        new = force_new or index == 0 or self.pos + len(ids) >= self.cfg.context
        if new:
            if sequence:
                self.engine.reset_sequence()
            self.pos = 0
            self.conversations += 1
            self._conversation = ([], deque(maxlen=TEXT_TOKENS))
        self._feed.clear()
        self._feed.extend(ids)
        self._conversation[0].extend(ids)
        self._turn, self.turn_index, self._generated = turn, index, 0

    def token_ids(self, prompt: str | tuple[int, ...]) -> list[int]:
        """A turn's prompt as token ids (text encoded once, when the session was built)."""
        return self._encoded[prompt] if isinstance(prompt, str) else list(prompt)

    def _sample(self, logits: torch.Tensor) -> int:
        t = self.cfg.temperature
        if t <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits.float().cpu() / t, dim=-1)
        return int(torch.multinomial(probs, 1, generator=self._gen))

    # -- snapshots ---------------------------------------------------------------------
    def _text(self) -> dict | None:
        """The current conversation as text, when the model has a tokenizer."""
        if self.tokenizer is None:
            return None
        prompt, output = self._conversation
        return {"prompt": self.tokenizer.decode(prompt),
                "output": self.tokenizer.decode(list(output)),
                "conversation": self.conversations}

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
        c = self.engine.counters
        routed, missed, tokens = c.expert_counts(window)
        taken = c.per_expert.residency()
        mc = self.ckpt.config
        return {
            "view": "window" if window else "cumulative",
            "tokens": tokens,
            "layers": mc.num_layers, "experts": mc.num_experts,
            "routings": routed.tolist(),
            "misses": missed.tolist(),
            "resident": None if taken is None else taken[0].astype(np.uint8).tolist(),
            "resident_at_token": None if taken is None else taken[1],
        }

    def _slot_gains(self, counters, quotas: list[int] | None, resident: list[int]
                    ) -> list[float | None]:
        """Per layer, the hit rate one slot more than its quota (or than its resident
        experts) would add over the window, in percentage points. The replay costs about
        0.2 ms per layer and window of 64 tokens, so it is redone only once a quarter of
        the window is new or the quotas changed, not for every snapshot of every token."""
        step = max(1, self.cfg.window // 4)
        key = (id(counters), counters.tokens // step, quotas and tuple(quotas))
        if self._gains[0] != key:  # the key is read before the routings: never newer
            sizes = quotas or resident
            per_layer = by_layer(Trace(counters.window_routings()).rows(), len(sizes))
            lookups = [sum(len(ids) for ids in r) for r in per_layer]
            gains = slot_gains(per_layer, sizes)
            self._gains = (key, [round(100.0 * g / n, 2) if n else None
                                 for g, n in zip(gains, lookups)])
        return self._gains[1]

    def snapshot(self) -> Snapshot:
        """Plain data: the same dict goes to the websocket, the TUI, --json and /metrics."""
        with self._lock:
            eng, ckpt = self.engine, self.ckpt
            self.seq += 1
            seq, version, applied = self.seq, self.version, self.applied_version
            settled, cfg, changes = self.settled_version, self.cfg, list(self.changes)
        mc, c = ckpt.config, eng.counters
        resident = list(self._resident)
        quota = eng.slots.quotas
        gain = self._slot_gains(c, quota, resident)
        whole = c.view(False, resident, quota, gain)
        return {
            "schema": SCHEMA,
            "seq": seq,
            "engine_version": __version__,
            "state": self.state,
            "error": self.error,
            "settings_version": applied,
            "pending_version": version if version > settled else None,
            "settings": config_dict(cfg),
            "model": {
                "name": ckpt.name, "path": str(ckpt.folder), "arch": mc.arch,
                "layers": mc.num_layers, "experts": mc.num_experts, "top_k": mc.top_k,
                "expert_bytes": ckpt.expert_bytes,
            },
            "device": str(self.device),
            "arena": {"slots": eng.slots.n, "policy": eng.slots.policy.name,
                      "bytes": eng.slots.n * ckpt.expert_bytes,
                      "split": "global" if quota is None else "layers"},
            **whole,
            "conversations": self.conversations,
            "workload": {"name": self.workload.name,
                         "conversations": len(self.workload.conversations),
                         "turn": self.turn_index + 1},
            "output_hash": self._hash.hexdigest()[:16],
            "window": c.view(True, resident, quota, gain),
            "text": self._text(),
            "notes": eng.notes(),
            "changes": changes,
        }
