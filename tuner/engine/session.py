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
from dataclasses import fields
from pathlib import Path

import numpy as np
import torch

from tuner import __version__
from tuner.engine import synth
from tuner.engine.checkpoint import Checkpoint
from tuner.engine.decode import Engine
from tuner.engine.model import ModelError
from tuner.engine.snapshot import Experts, Snapshot
from tuner.engine.verify import find_bad_expert
from tuner.knobs import BY_NAME, Config, config_dict

log = logging.getLogger(__name__)

SCHEMA = 1
RESTART = frozenset(k.name for k in BY_NAME.values() if k.restart)
PROMPT_LEN = 16
MAX_CHANGES = 200
TEXT_TOKENS = 200  # generated tokens of the current conversation kept as text


def pick_device(name: str = "auto") -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        knob = BY_NAME["device"]
        raise ValueError(f"{knob.name} ({knob.env}) = 'cuda' is not allowed here: torch "
                         "sees no CUDA device; allowed here: auto, cpu")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def prompts(seed: int, vocab: int, topics: int):
    """Endless built-in prompts: each a run of tokens from one topic of the demo model."""
    g = torch.Generator().manual_seed(seed)
    while True:
        topic = int(torch.randint(0, topics, (1,), generator=g))
        ids = torch.randint(0, max(1, vocab // topics), (PROMPT_LEN,), generator=g)
        yield (ids * topics + topic).clamp(max=vocab - 1).tolist()


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


def model_folder(cfg) -> Path:
    return Path(cfg.model) if cfg.model else synth.ensure()


class Session:
    def __init__(self, cfg: Config | None = None, prompt_ids: list[int] | None = None,
                 prompt: str | None = None):
        """`prompt_ids` or `prompt` (text, needs the model's tokenizer.json) replaces the
        built-in corpus: every conversation starts from it."""
        self.cfg = cfg or Config()
        self.prompt_text = prompt
        self.unknown_words: list[str] = []  # words of `prompt` the tokenizer does not know
        self.version = 1  # the latest version submitted
        self.applied_version = 1  # the version the engine runs
        self.settled_version = 1  # the latest version applied, refused or withdrawn
        self.prompt_ids = prompt_ids
        self._lock = threading.Condition()
        self._pending: tuple[Config, int] | None = None
        self._reset_pending = False
        self._paused = False
        self._stop = False
        self._recover = False  # resumed after an error: rebuild before the next token
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        self.changes: deque[dict] = deque(maxlen=MAX_CHANGES)
        self.seq = 0
        self._build(self.cfg)

    # -- building ----------------------------------------------------------------------
    def _build(self, cfg: Config) -> None:
        """Opens the model and builds the engine; nothing of the old one is touched until
        both succeeded, so a bad restart-class change leaves the session as it was."""
        device = pick_device(cfg.device)
        ckpt = Checkpoint(model_folder(cfg))
        tokenizer = load_tokenizer(ckpt.folder)
        if self.prompt_text is not None and tokenizer is None:
            raise ValueError(f"{ckpt.folder} has no tokenizer.json, so a text prompt cannot "
                             "be encoded; give prompt ids instead")
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
        if self.prompt_text is not None:
            self.prompt_ids, self.unknown_words = encode(tokenizer, self.prompt_text)
        self.rewind(cfg)

    def rewind(self, cfg: Config | None = None) -> None:
        """Back to the start of the workload: the first prompt, the sampler's seed, an empty
        output hash; the arena keeps what it holds. Call it between tokens only."""
        cfg = cfg or self.cfg
        ckpt = self.ckpt
        topics = ckpt.raw_config.get("tuner_recipe", {}).get("topics", 1)
        self._prompts = prompts(cfg.seed, ckpt.config.vocab_size, topics)
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

    def pause(self) -> None:
        with self._lock:
            self._paused = True
            self.engine.hurry.set()

    def resume(self) -> None:
        """Decoding goes on; after an error, on a rebuilt engine."""
        with self._lock:
            self._paused = False
            if self.error is not None:
                self.error, self._recover = None, True
            self._lock.notify_all()

    def reset_counters(self) -> None:
        with self._lock:
            self._reset_pending = True
            self._lock.notify_all()

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

    def run(self, tokens: int, stop: threading.Event | None = None) -> None:
        """Decodes `tokens` tokens on the calling thread (fewer once `stop` is set), then
        settles speculation."""
        use_threads(self.cfg.threads)
        for _ in range(tokens):
            if stop is not None and stop.is_set():
                break
            with self._lock:
                boundary = self._take_boundary()
            self._apply(boundary)
            self._token()
        self.engine.drain()

    def _token(self) -> None:
        eng, cfg = self.engine, self.cfg
        # Driven by a trace, conversations start where the trace's sequences do; a
        # sequence longer than the context restarts the model's text only.
        sequence = eng.routing.sequence_start if eng.routing else None
        if sequence or not self._feed:
            if sequence or self._logits is None or self.pos >= cfg.context:
                self._new_conversation(sequence is not False)
            else:
                tok = self._sample(self._logits)
                self.output_ids.append(tok)
                self._conversation[1].append(tok)
                self._feed.append(tok)
        tok = self._feed.popleft()
        t0 = time.perf_counter()
        logits = eng.step(tok, self.pos)
        host = logits.detach().cpu()
        if not torch.isfinite(host).all():
            raise FloatingPointError(self._why_not_finite())
        self._logits = logits
        self.pos += 1
        self._resident = eng.resident_counts()
        eng.counters.end_token(time.perf_counter() - t0)
        self._take_residency()
        self._hash.update(tok.to_bytes(4, "little"))
        self._hash.update(host.numpy().tobytes())

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

    def _new_conversation(self, sequence: bool = True) -> None:
        """Starts the next prompt; `sequence`: a new routing sequence too (the predictors
        start over)."""
        if sequence:
            self.engine.reset_sequence()
        self._feed.clear()
        self.pos = 0
        self.conversations += 1
        ids = self.prompt_ids if self.prompt_ids else next(self._prompts)
        ids = ids[: max(1, self.cfg.context - 1)]
        self._feed.extend(ids)
        self._conversation = (list(ids), deque(maxlen=TEXT_TOKENS))

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

    def snapshot(self) -> Snapshot:
        """Plain data: the same dict goes to the websocket, the TUI, --json and /metrics."""
        with self._lock:
            eng, ckpt = self.engine, self.ckpt
            self.seq += 1
            seq, version, applied = self.seq, self.version, self.applied_version
            settled, cfg, changes = self.settled_version, self.cfg, list(self.changes)
        mc, c = ckpt.config, eng.counters
        resident = list(self._resident)
        cum, tokens, secs = c.read(False)
        win, wtok, wsecs = c.read(True)
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
                      "bytes": eng.slots.n * ckpt.expert_bytes},
            "tokens": tokens,
            "conversations": self.conversations,
            "output_hash": self._hash.hexdigest()[:16],
            "totals": c.totals(cum, tokens, secs, resident),
            "layers": c.rows(cum, tokens, resident),
            "window": {
                "tokens": wtok,
                "totals": c.totals(win, wtok, wsecs, resident),
                "layers": c.rows(win, wtok, resident),
            },
            "text": self._text(),
            "notes": eng.notes(),
            "changes": changes,
        }
