"""What a session opens from its settings: the compute device, the model and its tokenizer,
the workload with its text prompts encoded, and the engine built on them.

`open_parts` builds all of it or raises, touching nothing that runs, so a session can keep
its running engine when a restart-class change cannot be built.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import torch

from tuner.config import Config
from tuner.engine.session.workloads import load as load_workload
from tuner.engine.step.decode import Engine
from tuner.engine.weights import synth
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.errors import TunerError
from tuner.knobs import BY_NAME
from tuner.vocabulary import inputs
from tuner.vocabulary.model_config import ModelError
from tuner.vocabulary.workload import Workload, WorkloadError


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


def model_folder(cfg: Config) -> Path:
    return Path(cfg.model) if cfg.model else synth.ensure()


def load_tokenizer(folder: Path):
    """The model's tokenizers.Tokenizer, or None when it ships no tokenizer.json."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    try:
        text = inputs.read_text(path, inputs.TOKENIZER)
    except (OSError, inputs.PathError) as err:
        raise ModelError(f"{path} cannot be read ({err}); remove it to run the model without "
                         "text") from None
    try:
        return Tokenizer.from_str(text)
    except Exception as err:  # the library raises plain Exception for a bad file
        raise ModelError(f"{path} is not a tokenizer file the tokenizers library reads "
                         f"({err}); remove it to run the model without text") from None


def encode(tokenizer, text: str) -> tuple[list[int], list[str]]:
    """(token ids of `text`, the words of it that became the unknown token); WorkloadError
    for text that is not Unicode (a lone surrogate, from an undecodable command line)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise WorkloadError(f"prompt {inputs.brief(text)} holds a lone surrogate at "
                            f"character {err.start}; prompts must be Unicode text") from None
    encoding = tokenizer.encode(text)
    unk = getattr(tokenizer.model, "unk_token", None)
    unk_id = tokenizer.token_to_id(unk) if unk else None
    unknown = [text[start:end] for i, (start, end) in zip(encoding.ids, encoding.offsets)
               if unk_id is not None and i == unk_id]
    return encoding.ids, unknown


def unknown_words_note(tokenizer, words: list[str]) -> str:
    """What a prompt lost to the unknown token, and what the vocabulary holds instead."""
    vocab = tokenizer.get_vocab_size()
    unk = tokenizer.model.unk_token
    some = [t for i in range(0, vocab, max(1, vocab // 6))
            if (t := tokenizer.id_to_token(i)) not in (None, unk)]
    shown = ", ".join(words[:8]) + (f" and {len(words) - 8} more" if len(words) > 8 else "")
    return (f"{len(words)} prompt word(s) are not in the model's vocabulary and were read as "
            f"{unk}: {shown}; its vocabulary is {vocab} words such as {', '.join(some)}, so "
            "write prompts in those (or give token ids)")


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


@dataclass(frozen=True)
class Parts:
    """What one build of a session holds: a session swaps them all at once."""

    device: torch.device
    ckpt: Checkpoint
    tokenizer: object | None  # a tokenizers.Tokenizer
    workload: Workload
    encoded: dict[str, list[int]]  # every text prompt of the workload, encoded once
    unknown: list[str]  # words of those prompts the tokenizer does not know
    engine: Engine


def open_parts(cfg: Config, workload: Workload | None = None) -> Parts:
    """Opens the model `cfg` names and builds an engine on it, for `workload` or the one the
    settings name. Raises ModelError, WorkloadError, DeviceError or what the engine's build
    raises, having left nothing running."""
    device = pick_device(cfg.device)
    ckpt = Checkpoint(model_folder(cfg))
    tokenizer = load_tokenizer(ckpt.folder)
    topics = ckpt.topics
    workload = workload or load_workload(cfg.workload, cfg.seed, ckpt.config.vocab_size,
                                         topics)
    texts = {t.prompt for c in workload.conversations for t in c if isinstance(t.prompt, str)}
    if tokenizer is None and texts:
        raise WorkloadError(f"workload {workload.name}: {ckpt.folder} has no "
                            "tokenizer.json, so text prompts cannot be encoded; give "
                            "prompt ids instead")
    encoded, unknown = {}, []
    for text in texts:
        encoded[text], words = encode(tokenizer, text)
        unknown += [w for w in words if w not in unknown]
    return Parts(device, ckpt, tokenizer, workload, encoded, unknown,
                 Engine(ckpt, cfg, device))
