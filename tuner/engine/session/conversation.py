"""Where a session is in its workload and what it decoded: the turn it feeds, the sampler,
the output hash and the text so far; and one step of it through the engine.

A `Conversation` starts at the workload's first turn with the sampler's seed and an empty
output hash (a session makes a new one to rewind); the engine's arena keeps what it holds.
Its methods run between tokens, on the thread that decodes.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from collections.abc import Iterator

import numpy as np
import torch

from tuner.config import Config
from tuner.engine.memory.verify import NotFinite, find_bad_expert
from tuner.engine.step.decode import Engine
from tuner.vocabulary.snapshot import Text
from tuner.vocabulary.workload import Turn, Workload

TEXT_TOKENS = 200  # generated tokens of the current conversation kept as text


def take_residency(engine: Engine) -> None:
    """The residency map, at a token boundary, when a reader asked for one."""
    per_expert = engine.counters.per_expert
    if per_expert.wants_residency:
        per_expert.set_residency(engine.resident_map(), engine.counters.tokens)


class Conversation:
    def __init__(self, engine: Engine, workload: Workload, encoded: dict[str, list[int]],
                 seed: int):
        """`encoded`: the workload's text prompts as token ids."""
        self.engine, self.workload, self._encoded = engine, workload, encoded
        self._turns = workload.turns()
        self._turn: Turn | None = None
        self.turn_index = 0  # of the current turn in its conversation
        self._generated = 0  # tokens generated in the current turn
        self._gen = torch.Generator().manual_seed(seed)
        self._hash = hashlib.sha256()
        self._feed: deque[int] = deque()
        self.logits: torch.Tensor | None = None  # of the last step, on the host
        self.pos = 0
        self.conversations = 0
        self.output_ids: deque[int] = deque(maxlen=4096)
        self.prompt_ids: list[int] = []  # of the current conversation, and its output:
        self.generated_ids: deque[int] = deque(maxlen=TEXT_TOKENS)
        self.resident = engine.resident_counts()  # per layer, at the last token boundary

    @property
    def output_hash(self) -> str:
        return self._hash.hexdigest()[:16]

    def token_ids(self, prompt: str | tuple[int, ...]) -> list[int]:
        """A turn's prompt as token ids (text encoded once, when the session was built)."""
        return self._encoded[prompt] if isinstance(prompt, str) else list(prompt)

    def advance(self, cfg: Config, budget: int | None = None) -> int:
        """One step: the waiting prompt tokens (up to `budget`) prefilled together, or one
        token generated; returns the tokens it ran."""
        eng = self.engine
        # Driven by a trace, conversations start where the trace's sequences do; a
        # sequence longer than the context restarts the model's text only.
        sequence = eng.routing.sequence_start if eng.routing else None
        if sequence or not self._feed:
            if sequence or self._turn_done(cfg):
                self._next_turn(cfg, sequence is not False, force_new=bool(sequence))
            else:
                assert self.logits is not None  # a turn that is not done has run a step
                tok = self._sample(cfg, self.logits)
                self.output_ids.append(tok)
                self.generated_ids.append(tok)
                self._generated += 1
                self.step([tok], "decode")
                return 1
        # a trace routes token by token, so its prompts go one token a step
        n = 1 if eng.routing else min(len(self._feed), budget or len(self._feed))
        self.step([self._feed.popleft() for _ in range(n)], "prefill")
        return n

    def step(self, ids: list[int], phase: str) -> tuple[torch.Tensor, torch.Tensor | None]:
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
        if not np.isfinite(host.numpy()).all():  # numpy's check: a tenth of torch's time
            raise NotFinite(self._why_not_finite())
        self.logits = host  # sampled from here: no second copy off the device
        self.pos += len(ids)
        self.resident = eng.resident_counts()
        seconds = time.perf_counter() - t0
        if exact is not None:
            assert eng.quality is not None  # exact_first ran it
            eng.quality.score(exact, host)
        eng.counters.end_token(seconds, len(ids), phase,
                               prompts=int(phase == "prefill" and not self._feed))
        take_residency(eng)
        for tok in ids:
            self._hash.update(tok.to_bytes(4, "little"))
        self._hash.update(np.ascontiguousarray(host.numpy()).data)  # its buffer, not a copy
        return host, exact

    def forced(self, span: int, ids: list[int]
               ) -> Iterator[tuple[int, torch.Tensor, torch.Tensor | None]]:
        """Teacher forcing: feeds `ids` in windows of `span` tokens, each a new sequence,
        and yields (the next id, the served logits, the exact logits or None) at every
        position that has a next id; settles speculation at the end."""
        for start in range(0, len(ids) - 1, span):
            window = ids[start:start + span + 1]
            self.engine.reset_sequence()
            self.pos = 0
            for tok, nxt in zip(window, window[1:]):
                served, exact = self.step([tok], "decode")
                yield nxt, served, exact
        self.engine.drain()

    def text(self, tokenizer) -> Text | None:
        """The current conversation as text, when the model has a tokenizer."""
        if tokenizer is None:
            return None
        return {"prompt": tokenizer.decode(self.prompt_ids),
                "output": tokenizer.decode(list(self.generated_ids)),
                "conversation": self.conversations}

    def _turn_done(self, cfg: Config) -> bool:
        turn = self._turn
        return (self.logits is None or self.pos >= cfg.context or turn is None
                or (turn.max_tokens is not None and self._generated >= turn.max_tokens))

    def _next_turn(self, cfg: Config, sequence: bool = True, force_new: bool = False) -> None:
        """Feeds the workload's next prompt: a new conversation at its first turn (or when
        the prompt would not fit the context), else after the previous turn's tokens.
        `sequence`: a new conversation is a new routing sequence too (the predictors start
        over)."""
        index, turn = next(self._turns)
        ids = self.token_ids(turn.prompt)[: max(1, cfg.context - 1)]
        new = force_new or index == 0 or self.pos + len(ids) >= cfg.context
        if new:
            if sequence:
                self.engine.reset_sequence()
            self.pos = 0
            self.conversations += 1
            self.prompt_ids, self.generated_ids = [], deque(maxlen=TEXT_TOKENS)
        self._feed.clear()
        self._feed.extend(ids)
        self.prompt_ids.extend(ids)
        self._turn, self.turn_index, self._generated = turn, index, 0

    def _sample(self, cfg: Config, logits: torch.Tensor) -> int:
        t = cfg.temperature
        if t <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits.float() / t, dim=-1)
        return int(torch.multinomial(probs, 1, generator=self._gen))

    def _why_not_finite(self) -> str:
        """Names the expert whose bytes on disk made this token's logits NaN or inf, when
        one of the experts it routed to has non-finite values."""
        eng = self.engine
        keys = [(l, e) for l, sel in enumerate(eng.probe.prev) for e in sel or ()]
        found = find_bad_expert(eng.ckpt, keys)
        what = found or ("no expert this token routed to holds non-finite values on disk: "
                         "the dense weights or an arena copy do")
        return (f"the logits of token {eng.counters.tokens + 1} are not finite (NaN or inf): "
                f"{what}; verify_reads = 1 checks every expert read before it is used")
