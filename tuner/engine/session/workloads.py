"""The built-in workloads, drawn with torch's seeded generator (so a seed names the same
tokens everywhere), and loading a workload by name or file. The formats, the names and
the file reader are torch-free: tuner.vocabulary.workload."""

from __future__ import annotations

import torch

from tuner.vocabulary.workload import (
    BUILTIN,
    CORPUS_PROMPT,
    CORPUS_SIZE,
    NAMES,
    Turn,
    Workload,
    file_of,
    read_file,
)


class _Draws:
    """Seeded draws from torch's generator, whose stream the built-in workloads' tokens
    are."""

    def __init__(self, seed: int):
        self.torch, self.g = torch, torch.Generator().manual_seed(seed)

    def pick(self, n: int) -> int:
        """One of 0..n-1."""
        return int(self.torch.randint(0, n, (1,), generator=self.g))

    def topic_prompt(self, topic: int, length: int, vocab: int,
                     topics: int) -> tuple[int, ...]:
        ids = self.torch.randint(0, max(1, vocab // topics), (length,), generator=self.g)
        return tuple((ids * topics + topic).clamp(max=vocab - 1).tolist())


def corpus(seed: int, vocab: int, topics: int) -> Workload:
    """The built-in corpus: prompts of one random topic each, generated until the context is
    full (what a session decodes when no workload is named)."""
    draws = _Draws(seed)
    convs = []
    for _ in range(CORPUS_SIZE):
        topic = draws.pick(topics)
        convs.append((Turn(draws.topic_prompt(topic, CORPUS_PROMPT, vocab, topics), None),))
    return Workload("corpus", tuple(convs))


def _chat(name: str, seed: int, vocab: int, topics: int, shifted: bool, conversations: int,
          turns: int, prompt: int, max_tokens: int) -> Workload:
    """Conversations on one topic each: the topics with id % 4 == 3 when `shifted`, the
    other topics otherwise."""
    bands = max(topics, 4)  # a model without topics: id bands stand in for them
    pool = [t for t in range(bands) if (t % 4 == 3) == shifted]
    draws = _Draws(seed)
    convs = []
    for _ in range(conversations):
        topic = pool[draws.pick(len(pool))]
        convs.append(tuple(Turn(draws.topic_prompt(topic, prompt, vocab, bands), max_tokens)
                           for _ in range(turns)))
    return Workload(name, tuple(convs))


def builtin(name: str, seed: int, vocab: int, topics: int) -> Workload:
    if name == "corpus":
        return corpus(seed, vocab, topics)
    _, conversations, turns, prompt, max_tokens, shifted = BUILTIN[name]
    return _chat(name, seed, vocab, topics, shifted, conversations, turns, prompt,
                 max_tokens)


def load(spec: str, seed: int, vocab: int, topics: int) -> Workload:
    """A built-in workload by name, else a file."""
    if spec in NAMES:
        return builtin(spec, seed, vocab, topics)
    return read_file(file_of(spec))
