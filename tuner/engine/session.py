"""A decode session: the engine, its settings, a prompt source and the snapshots it publishes.

The decode loop runs in its own thread (`start`) or synchronously (`run`). Settings arrive
as whole validated `Config` objects and are applied at the next token boundary, atomically:
live knobs in place, restart-class knobs (arena size, I/O pool, model) by rebuilding the
engine in place. Every snapshot names the settings version that produced it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import deque
from dataclasses import fields
from pathlib import Path

import torch

from tuner import __version__
from tuner.engine import synth
from tuner.engine.budgets import by_layer, slot_gains
from tuner.engine.checkpoint import Checkpoint
from tuner.engine.decode import Engine
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

    return Tokenizer.from_file(str(path))


TORCH_THREADS = torch.get_num_threads()  # torch's own default, before anything changed it


def use_threads(n: int) -> None:
    """`n` intra-op threads for torch work on the calling thread (0: torch's default).
    OpenMP keeps the count per thread, so the thread that decodes sets it itself."""
    torch.set_num_threads(n or TORCH_THREADS)


def model_folder(cfg) -> Path:
    return Path(cfg.model) if cfg.model else synth.ensure()


class Session:
    def __init__(self, cfg: Config | None = None, prompt_ids: list[int] | None = None,
                 prompt: str | None = None):
        """`prompt_ids` or `prompt` (text, needs the model's tokenizer.json) replaces the
        built-in corpus: every conversation starts from it."""
        self.cfg = cfg or Config()
        self.prompt_text = prompt
        self.version = 1
        self.applied_version = 1
        self.prompt_ids = prompt_ids
        self._lock = threading.Condition()
        self._pending: tuple[Config, int] | None = None
        self._reset_pending = False
        self._paused = False
        self._stop = False
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
        if self.prompt_text is not None and tokenizer is None:
            raise ValueError(f"{ckpt.folder} has no tokenizer.json, so a text prompt cannot "
                             "be encoded; give prompt ids instead")
        engine = Engine(ckpt, cfg, device)
        if getattr(self, "engine", None) is not None:
            self.engine.close()
        self.cfg, self.ckpt, self.engine, self.device = cfg, ckpt, engine, device
        self.tokenizer = tokenizer
        if self.prompt_text is not None:
            self.prompt_ids = tokenizer.encode(self.prompt_text).ids
        mc = ckpt.config
        topics = self.ckpt.raw_config.get("tuner_recipe", {}).get("topics", 1)
        self._prompts = prompts(cfg.seed, mc.vocab_size, topics)
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
            self._lock.notify_all()
            return self.version

    def wait_applied(self, version: int, timeout: float = 30.0) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: self.applied_version >= version or
                                       self.error is not None, timeout)

    def rejection(self, version: int) -> str | None:
        """Why settings `version` was not applied, or None."""
        with self._lock:
            return next((c["rejected"] for c in self.changes if c["version"] == version), None)

    def pause(self) -> None:
        with self._lock:
            self._paused = True

    def resume(self) -> None:
        with self._lock:
            self._paused = False
            self.error = None
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

    def stop(self) -> None:
        with self._lock:
            self._stop = True
            self._lock.notify_all()
        if self._thread:
            self._thread.join(timeout=30)
        self.engine.close()

    def _loop(self) -> None:
        use_threads(self.cfg.threads)
        while True:
            with self._lock:
                self._lock.notify_all()  # a token was counted (wait_tokens)
                if self._stop:
                    return
                boundary = self._boundary_locked()
                if self._paused or self.error:
                    self._lock.wait(0.1)
                    continue
            self._apply(boundary)
            try:
                self._token()
            except Exception as err:  # shown in the snapshot; the loop waits for resume
                log.exception("decode failed")
                with self._lock:
                    self.error = f"{type(err).__name__}: {err}"
                    self._lock.notify_all()

    def _boundary_locked(self):
        pending, reset = self._pending, self._reset_pending
        self._pending, self._reset_pending = None, False
        if pending is not None and (self._paused or self.error):
            self._apply((pending, reset))  # apply now: a paused session still takes settings
            return (None, False)
        if reset and (self._paused or self.error):
            self._apply((None, True))
            return (None, False)
        return (pending, reset)

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
                    self.cfg = cfg
            except (OSError, ValueError, KeyError) as err:
                rejected = f"{type(err).__name__}: {err}"
                log.error("settings version %d rejected, kept the running engine and its "
                          "settings: %s", version, rejected)
            if "threads" in changed:
                use_threads(self.cfg.threads)
            with self._lock:
                self.changes.append({"version": version, "token": self.tokens,
                                     "changed": changed, "rebuilt": rebuilt and not rejected,
                                     "rejected": rejected})
                self.applied_version = version
                self._lock.notify_all()
        if reset:
            self.engine.reset_counters()

    def run(self, tokens: int) -> None:
        """Decodes `tokens` tokens on the calling thread, then settles speculation."""
        use_threads(self.cfg.threads)
        for _ in range(tokens):
            with self._lock:
                boundary = self._boundary_locked()
            self._apply(boundary)
            self._token()
        self.engine.drain()

    def _token(self) -> None:
        eng, cfg = self.engine, self.cfg
        if not self._feed:
            if self._logits is None or self.pos >= cfg.context:
                self._new_conversation()
            else:
                tok = self._sample(self._logits)
                self.output_ids.append(tok)
                self._conversation[1].append(tok)
                self._feed.append(tok)
        tok = self._feed.popleft()
        t0 = time.perf_counter()
        logits = eng.step(tok, self.pos)
        self._logits = logits
        self.pos += 1
        self._resident = eng.resident_counts()
        eng.counters.end_token(time.perf_counter() - t0)
        self._hash.update(tok.to_bytes(4, "little"))
        self._hash.update(logits.detach().cpu().numpy().tobytes())

    def _new_conversation(self) -> None:
        self.engine.reset_sequence()
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
            per_layer = by_layer(counters.window_routes(), len(sizes))
            lookups = [sum(len(ids) for ids in r) for r in per_layer]
            gains = slot_gains(per_layer, sizes)
            self._gains = (key, [round(100.0 * g / n, 2) if n else None
                                 for g, n in zip(gains, lookups)])
        return self._gains[1]

    def snapshot(self) -> dict:
        """Plain data: the same dict goes to the websocket, the TUI, --json and /metrics."""
        eng, mc = self.engine, self.ckpt.config
        c = eng.counters
        resident = list(self._resident)
        with self._lock:
            self.seq += 1
            seq, version, applied = self.seq, self.version, self.applied_version
            cfg, changes = self.cfg, list(self.changes)
        cum, tokens, secs = c.read(False)
        win, wtok, wsecs = c.read(True)
        quota = eng.slots.quotas
        gain = self._slot_gains(c, quota, resident)
        return {
            "schema": SCHEMA,
            "seq": seq,
            "engine_version": __version__,
            "state": self.state,
            "error": self.error,
            "settings_version": applied,
            "pending_version": version if version != applied else None,
            "settings": config_dict(cfg),
            "model": {
                "name": self.ckpt.name, "path": str(self.ckpt.folder), "arch": mc.arch,
                "layers": mc.num_layers, "experts": mc.num_experts, "top_k": mc.top_k,
                "expert_bytes": self.ckpt.expert_bytes,
            },
            "device": str(self.device),
            "arena": {"slots": eng.slots.n, "policy": eng.slots.policy.name,
                      "bytes": eng.slots.n * self.ckpt.expert_bytes,
                      "split": "global" if quota is None else "layers"},
            "tokens": tokens,
            "conversations": self.conversations,
            "output_hash": self._hash.hexdigest()[:16],
            "totals": c.totals(cum, tokens, secs, resident),
            "layers": c.rows(cum, resident, quota, gain),
            "window": {
                "tokens": wtok,
                "totals": c.totals(win, wtok, wsecs, resident),
                "layers": c.rows(win, resident, quota, gain),
            },
            "text": self._text(),
            "notes": eng.notes(),
            "changes": changes,
        }
