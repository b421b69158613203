"""Every benchmark section, declared once: `tuner bench --only`, the GPU suite
(tuner.bench.gpu_suite) and the docs' table of sections read this table.

A section is a module with `measure(cfg, tokens, opts) -> dict` (the figures, plain data;
a section that cannot run here returns {"skipped": why}) and `text(result) -> str` (the
lines `tuner bench` prints). The table names the module, so listing the sections imports nothing
heavy and a section that drives the web page or the terminal UI lives beside them
(tuner.web.bench, tuner.ui.bench): nothing under tuner.bench or tuner.measure imports
tuner.web or tuner.ui (a test checks it).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass

from tuner.config import Config
from tuner.errors import TunerError

SITES_FRACS = (0.0, 0.1, 0.171, 0.25, 0.4, 0.6, 0.8, 1.0)


class SectionError(TunerError, ValueError):
    """A section name the table does not hold."""


@dataclass(frozen=True)
class Options:
    """What a run asks of its sections beyond the settings."""

    tokens: int | None = None  # per measurement; None: each section's own default
    fracs: tuple[float, ...] = SITES_FRACS  # pcie_frac values of the sites sweep
    scale: float = 0.1  # times the emulated link and CPU bandwidths of the sites sweep
    rounds: int = 4  # rounds of the ui section's phases
    offload_tokens: int = 8  # tokens of transformers with accelerate's offload (peer)


@dataclass(frozen=True)
class Section:
    name: str
    label: str  # how its line starts: "(a) read"
    what: str  # what it measures against what, in one line
    module: str  # holds measure(cfg, tokens, opts) and text(result)
    tokens: int = 64  # tokens per measurement unless the run gives a count
    default: bool = False  # run by `tuner bench` without --only
    gpu: bool = False  # run by the GPU suite without --only

    def measure(self, cfg: Config, opts: Options) -> dict:
        code = importlib.import_module(self.module)
        return code.measure(cfg, opts.tokens or self.tokens, opts)

    def text(self, result: dict) -> str:
        if "skipped" in result:
            return f"{self.label}: {result['skipped']}"
        return importlib.import_module(self.module).text(result)


SECTIONS: tuple[Section, ...] = (
    Section("greedy", "greedy", "the demo model in float32 and bfloat16 decoded greedily on "
            "the CPU and on CUDA at the default settings: the same tokens, and the largest "
            "logit difference while the inputs agree (needs a GPU)", "tuner.bench.greedy",
            gpu=True),
    Section("resident", "resident", "streaming logits on CUDA against the fully resident "
            "model's, float32 and bfloat16: bit-identical is the claim (needs a GPU)",
            "tuner.bench.resident", gpu=True),
    Section("read", "(a) read", "the engine's reads while serving misses against the "
            "store's raw read, both with O_DIRECT", "tuner.bench.read", default=True,
            gpu=True),
    Section("machinery", "(b) machinery", "ms per token through the arena with every lookup "
            "a hit against the fully resident model, interleaved on the same tokens",
            "tuner.bench.machinery", default=True, gpu=True),
    Section("telemetry", "(c) telemetry", "tokens per second with 10 websocket clients "
            "reading snapshots against none, and the share of a core they cost with the "
            "engine paused (timed rounds of 5 s: --tokens does not apply)", "tuner.web.bench",
            default=True),
    Section("link", "(d) link", "the engine's host-to-device uploads against a plain pinned "
            "copy (needs a GPU)", "tuner.bench.link", default=True, gpu=True),
    Section("limit", "(e) limit", "ms per token at the current settings against the "
            "physical floor (the bytes a token reads where it computes, and its misses over "
            "the store or the link) and against the same products at full speed",
            "tuner.bench.limit", default=True, gpu=True),
    Section("quant", "(f) quant", "bytes and ms per token against the model's int4 copy "
            "(made once into the model cache), with the copy's quality", "tuner.bench.quant"),
    Section("prefill", "(g) prefill", "a 256-token prompt prefilled in one batch against "
            "token by token, each on a cold arena", "tuner.bench.prefill"),
    Section("prefetch", "(h) prefetch", "ms per token with stale-gate prefetch against none "
            "at the current settings, with the RAM and the disk store, interleaved on the "
            "same greedy tokens, with stall and bytes per token and the bytes moved, "
            "stale / none, beside the time", "tuner.bench.prefetch",
            gpu=True),
    Section("peer", "peer", "the engine against transformers on the same checkpoint, fully "
            "resident and with accelerate's offload at the engine's fast-memory budget "
            "(needs transformers and accelerate)", "tuner.bench.peer", gpu=True),
    Section("llamacpp", "llamacpp", "the engine against llama.cpp's llama-bench on the same "
            "model's GGUF: fully resident, and with -ncmoe at the engine's fast-memory expert "
            "bytes for each expert store and with every expert on the CPU (needs a llama-bench "
            "build: tools/llamacpp/build.sh)", "tuner.bench.llamacpp", gpu=True),
    Section("ui", "ui", "what the terminal UI costs the engine, embedded and connected, "
            "against no UI (--tokens a phase, default 160; --rounds)", "tuner.ui.bench",
            tokens=160),
    Section("sites", "sites", "ms per token over pcie_frac (--fracs) beside the site-bound "
            "prediction, with the link_gbps and cpu_gbps of a preset such as seed002-x4 "
            "scaled by --scale, or the real sites when both are 0", "tuner.bench.sites",
            gpu=True),
)
BY_NAME = {s.name: s for s in SECTIONS}
DEFAULT = tuple(s.name for s in SECTIONS if s.default)
GPU = tuple(s.name for s in SECTIONS if s.gpu)


def chosen(names: Iterable[str]) -> list[Section]:
    """The sections `names` names, in the table's order. Raises SectionError naming the
    unknown ones and the sections there are."""
    wanted = {n.strip() for n in names if n.strip()}
    unknown = sorted(wanted - BY_NAME.keys())
    if unknown:
        raise SectionError(f"unknown section(s) {', '.join(unknown)}; allowed: "
                           f"{', '.join(BY_NAME)}")
    return [s for s in SECTIONS if s.name in wanted]


def markdown() -> str:
    """The docs' table of sections (`tuner bench --list`)."""
    rows = ["| section | what it measures | run without --only by |", "|---|---|---|"]
    for s in SECTIONS:
        letter = s.label.removesuffix(s.name)  # "(a) " or nothing
        runs = ", ".join(w for w, on in (("`tuner bench`", s.default), ("the GPU suite", s.gpu))
                         if on) or "-"
        rows.append(f"| {letter}`{s.name}` | {s.what} | {runs} |")
    return "\n".join(rows) + "\n"
