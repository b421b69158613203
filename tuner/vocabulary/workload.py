"""Workloads: what a session decodes, as conversations of turns.

A workload is plain data: conversations, each a list of turns (a prompt and how many
tokens to generate after it). A session runs one for as many tokens as it is asked to,
cycling through its conversations; the A/B runner and a tuner run the same objects.
Within a conversation each turn continues the previous turn's KV cache; a new
conversation starts from position 0. The arena is never reset between them.

Built-in workloads (made by tuner.engine.session.workloads, with torch's seeded
generator) are drawn from the model's token topics (the demo model's prompts stay
on one topic, so a topic is a domain): `shifted` uses only topics the others never use.
A model without topics has its vocabulary cut into bands by id modulo 4, which are not
domains: bring a file of real prompts for such a model.

A file is JSON lines, one conversation a line: {"prompt": "...", "max_tokens": N} or
{"turns": ["...", "..."], "max_tokens": N} (max_tokens optional, per turn).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import TunerError
from tuner.vocabulary import inputs

MAX_TOKENS = (1, 65536)  # allowed range of a turn's max_tokens
DEFAULT_MAX_TOKENS = 64
CORPUS_PROMPT = 16  # tokens of a built-in corpus prompt
CORPUS_SIZE = 256  # conversations of the corpus before it repeats
MAX_REPORTED = 10  # bad lines of a file an error names
FILE_FORM = ('each line is {"prompt": "...", "max_tokens": N} or '
             '{"turns": ["...", "..."], "max_tokens": N}; max_tokens optional, from '
             f'{MAX_TOKENS[0]} to {MAX_TOKENS[1]}')


class WorkloadError(TunerError, ValueError):
    """A workload that cannot be loaded; the message names the file, line and rule."""


@dataclass(frozen=True, slots=True)  # a workload file may hold many
class Turn:
    prompt: str | tuple[int, ...]  # text (encoded with the model's tokenizer) or token ids
    max_tokens: int | None  # None: generate until the context is full


@dataclass(frozen=True)
class Workload:
    name: str
    conversations: tuple[tuple[Turn, ...], ...]

    def turns(self):
        """(turn index in its conversation, turn), endlessly, conversation by conversation."""
        while True:
            for conversation in self.conversations:
                yield from enumerate(conversation)


# name -> (help, conversations, turns each, prompt tokens, max_tokens, shifted)
BUILTIN = {
    "chat-cold": ("a fresh conversation per prompt", 16, 1, 24, 40, False),
    "chat-warm": ("multi-turn: each turn continues the previous turn's KV and cache",
                  4, 4, 12, 24, False),
    "shifted": ("fresh conversations on topics the other workloads never use",
                16, 1, 24, 40, True),
    "long-prompt": ("prefill heavy: 192-token prompts, 16 tokens generated", 8, 1, 192, 16,
                    False),
}
NAMES = ("corpus", *BUILTIN)


def _max_tokens(obj: dict) -> int:
    n = obj.get("max_tokens", DEFAULT_MAX_TOKENS)
    if type(n) is not int or not MAX_TOKENS[0] <= n <= MAX_TOKENS[1]:
        raise ValueError(f"max_tokens {n!r} is not an integer from {MAX_TOKENS[0]} to "
                         f"{MAX_TOKENS[1]}")
    return n


def _conversation(line: bytes) -> tuple[Turn, ...]:
    try:
        obj = inputs.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    unknown = sorted(set(obj) - {"prompt", "turns", "max_tokens"})
    if unknown:
        raise ValueError(f"unknown keys {', '.join(map(_key, unknown))}")
    if ("prompt" in obj) == ("turns" in obj):
        raise ValueError("give either prompt or turns")
    texts = [obj["prompt"]] if "prompt" in obj else obj["turns"]
    if not isinstance(texts, list) or not texts or not all(
            isinstance(t, str) and t.strip() for t in texts):
        raise ValueError("prompt must be a non-empty string, turns a non-empty list of them")
    if not all(_unicode(t) for t in texts):  # "\ud800": JSON can spell what UTF-8 cannot
        raise ValueError("a prompt holds a lone surrogate (an unpaired \\ud800-\\udfff "
                         "escape); prompts must be Unicode text")
    n = _max_tokens(obj)
    return tuple(Turn(t, n) for t in texts)


def _key(name: str) -> str:
    """A key as an error names it: as it is, or quoted and cut when long, not Unicode or
    not printable (a newline in a key would split the one-line error)."""
    plain = len(name) <= 40 and _unicode(name) and name.isprintable()
    return name if plain else inputs.brief(name, 40)


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_file(path: Path, keep: bool = True) -> Workload:
    """A JSON-lines workload file; every bad line is named with its number in one error
    (the first MAX_REPORTED of them). Read a line at a time, within inputs.WORKLOAD; with
    `keep` False every line is checked and none kept (the workload has no conversations)."""
    convs: list[tuple[Turn, ...]] = []
    bad: list[str] = []  # the first MAX_REPORTED bad lines; `more` counts the rest
    more, found = 0, False
    try:
        for number, line in inputs.read_lines(path, inputs.WORKLOAD):
            if not line.strip():
                continue
            try:
                conversation = _conversation(line)
            except ValueError as err:  # the first few named, the rest counted
                if len(bad) < MAX_REPORTED:
                    bad.append(f"line {number}: {err}")
                else:
                    more += 1
                continue
            found = True
            if keep:
                convs.append(conversation)
    except inputs.PathError as err:
        raise WorkloadError(f"workload file {err}") from None
    except OSError as err:
        raise WorkloadError(f"workload file {path}: {err.strerror or err}") from None
    if more:
        bad.append(f"and {more:,} more bad lines")
    if bad:
        raise WorkloadError(f"workload file {path}: {'; '.join(bad)}; {FILE_FORM}")
    if not found:
        raise WorkloadError(f"workload file {path} holds no conversation; {FILE_FORM}")
    return Workload(Path(path).name, tuple(convs))


def check(spec: str) -> None:
    """Raises WorkloadError unless `spec` names a built-in or a good workload file (read a
    line at a time, nothing kept)."""
    if spec not in NAMES:
        read_file(file_of(spec), keep=False)


def check_name(spec: str) -> None:
    """Raises WorkloadError unless `spec` is a built-in's name or a path some file could
    have; it touches no file (`check` reads it)."""
    if spec not in NAMES:
        try:
            inputs.check(spec)
        except inputs.PathError as err:
            raise WorkloadError(f"workload {err}") from None


def file_of(spec: str) -> Path:
    try:
        there = inputs.kind(spec) == "file"
    except inputs.PathError as err:
        raise WorkloadError(f"workload {err}") from None
    if not there:
        raise WorkloadError(f"workload {inputs.shown(spec)} is neither a built-in "
                            f"({', '.join(NAMES)}) nor a file")
    return Path(spec)
