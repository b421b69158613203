"""The knob table: every engine knob declared once.

Env parsing, CLI flags, the web form, the TUI form, presets, validation messages, the
docs' knob page and the engine's typed `Config` (tuner/config.py, written by
`python -m tuner.knobs --write-config`) are all generated from `KNOBS`. This module is plain
data (standard library only, and the engine's torch-free path limits) so the engine can
read it without importing any UI or settings library.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from tuner.config import Config
from tuner.errors import CommandError, run
from tuner.vocabulary.inputs import ALLOWED as PATH_ALLOWED
from tuner.vocabulary.policies import POLICIES

GROUPS = ("routing", "prefetch", "cache", "prefill", "io", "tiers", "hardware", "session")


@dataclass(frozen=True)
class Knob:
    name: str
    env: str
    type: type  # bool, int, float, str, or tuple: whole numbers, written as text "3,3,2"
    default: Any
    help: str
    group: str
    seed: str = "-"  # the source document that defines it
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    unit: str = ""
    restart: bool = False  # True: changing it rebuilds the arena / model in place
    off: float | None = None  # a value below the range that switches the knob off
    pattern: str | None = None  # a str knob's allowed values as a regular expression
    pattern_words: str = ""  # the same in words, for error messages and help
    path: bool = False  # a str knob naming a file or folder: held to the system's limits
    # What `tuner tune` searches by default: (low, high) for a number, the values tried for
    # a switch or a choice; None = left at its value unless --space names it.
    search: tuple | None = None
    # A value other than 0 may change the output on purpose: such a knob is judged by the
    # quality gate, and `tuner tune` searches it only when a gate is given.
    lossy: bool = False

    @property
    def label(self) -> str:
        """How a message names the knob: its name and its environment variable."""
        return f"{self.name} ({self.env})"

    @property
    def annotation(self) -> str:
        """Its type as Config declares it."""
        return "tuple[int, ...]" if self.type is tuple else self.type.__name__

    @property
    def kind(self) -> str:
        """How a form shows it: flag, choice, int, float or text."""
        if self.type is bool:
            return "flag"
        if self.choices:
            return "choice"
        return {int: "int", float: "float"}.get(self.type, "text")

    def allowed(self) -> str:
        """The allowed values in words, for error messages and help."""
        if self.type is bool:
            return "0 or 1 (false or true)"
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.off is not None:
            assert self.min is not None and self.max is not None  # an off value is below a range
            return (f"{_num(self.off)} (off) or {self.type.__name__} in "
                    f"[{_num(self.min)}, {_num(self.max)}]")
        if self.pattern:
            return self.pattern_words
        if self.path:
            return PATH_ALLOWED
        if self.min is not None and self.max is not None:
            return f"{self.type.__name__} in [{_num(self.min)}, {_num(self.max)}]"
        if self.min is not None:
            return f"{self.type.__name__} >= {_num(self.min)}"
        return self.type.__name__

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "env": self.env,
            "type": self.type.__name__,
            "kind": self.kind,
            "default": written(self.default),
            "min": self.min,
            "max": self.max,
            "off": self.off,
            "choices": list(self.choices) if self.choices else None,
            "unit": self.unit,
            "group": self.group,
            "restart": self.restart,
            "help": self.help,
            "seed": self.seed,
            "allowed": self.allowed(),
            "search": list(self.search) if self.search else None,
        }


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


S000, S001, S002, S003 = "000", "001", "002", "003"
MIN_GBPS = 0.01  # the slowest emulated bandwidth
MAX_SLOTS = 1 << 20  # of the largest arena

KNOBS: tuple[Knob, ...] = (
    # routing
    Knob("moce_bonus", "STRATA_METAL_MOCE_BONUS", float, 0.0,
         "resident bonus b added to the logit of resident experts after the protected picks; "
         "0 = exact routing (bit-identical output)", "routing", S000, 0.0, 10.0, unit="logit",
         search=(0.0, 2.0), lossy=True),
    Knob("moce_protect", "STRATA_METAL_MOCE_PROTECT", int, 3,
         "picks made by raw logit before the bonus applies", "routing", S000, 0, 64),
    Knob("moce_bonus_r1", "STRATA_METAL_MOCE_BONUS_R1", float, 0.0,
         "resident preference from rank 1 up to protect", "routing", S000, 0.0, 10.0,
         unit="logit", lossy=True),
    Knob("drop_cold", "STRATA_DROP_COLD", float, 0.0,
         "drop-cold-experts: a routed expert that misses with a routing weight (softmax over "
         "the selected top-k) below this is neither read nor computed; the top-weighted "
         "expert is always kept, and prefetch skips predictions it would drop (0 = off)",
         "routing", S001, 0.0, 1.0, unit="weight", search=(0.0, 0.2), lossy=True),
    # prefetch
    Knob("prefetch", "STRATA_PREFETCH", str, "off",
         "predictor whose guesses for the next layer are read ahead", "prefetch", S001,
         choices=("off", "prev", "stale"),
         search=("off", "prev", "stale")),
    Knob("prefetch_max", "STRATA_PREFETCH_MAX", int, 2,
         "predicted misses speculated per layer (0 = all)", "prefetch", S001, 0, 512,
         unit="experts",
         search=(0, 8)),
    Knob("prefetch_unpert", "STRATA_METAL_PREFETCH_UNPERT", bool, True,
         "1 = predict the raw top-k; 0 = ranks >= 3 predicted with the resident bonus",
         "prefetch", S000),
    Knob("prefetch_route", "STRATA_METAL_PREFETCH_ROUTE", bool, False,
         "predict the set the moce router will pick (protect, bonus_r1); off when bonus <= 0",
         "prefetch", S000),
    Knob("prefetch_touch", "STRATA_METAL_PREFETCH_TOUCH", bool, False,
         "a speculative hit on a resident expert promotes it in the cache order",
         "prefetch", S000,
         search=(False, True)),
    # cache
    Knob("cache_policy", "STRATA_CACHE_POLICY", str, "lru",
         "the arena's eviction order: " + "; ".join(f"{name} = {policy.summary}"
                                                    for name, policy in POLICIES.items()),
         "cache", S000, choices=tuple(POLICIES), search=tuple(POLICIES)),
    Knob("expert_cache", "STRATA_EXPERT_CACHE", int, 0,
         "arena slots (0 = 20 % of the model's layer-expert pairs)", "cache", S000, 0, MAX_SLOTS,
         unit="slots", restart=True),
    Knob("arena_split", "STRATA_ARENA_SPLIT", str, "global",
         "global: one arena shared by all layers; layers: each layer has a slot quota "
         "(arena_budgets) and evicts within it", "cache", S000, choices=("global", "layers"),
         search=("global", "layers")),
    Knob("arena_budgets", "STRATA_ARENA_BUDGETS", tuple, (),
         "slot quota of each layer with arena_split = layers, summing to the arena (empty = "
         "an even split); `tuner budgets` computes them from hit curves", "cache", S000,
         0, MAX_SLOTS,
         pattern=r"^(\d+(,\d+)*)?$",
         pattern_words="comma-separated slot counts"),
    # prefill
    Knob("prefill", "STRATA_PREFILL", bool, True,
         "a prompt of more than 8 tokens runs as one batch: per layer the union of its "
         "routed experts is served once; 0 = token by token through the decode path",
         "prefill", S000),
    Knob("prompt_max_pre", "STRATA_PROMPT_MAX_PRE", int, 0,
         "prefill: experts of a layer's ranked union streamed into the arena, the rest "
         "computed from staging (0 = the seed's 256 of 512 experts, 128 from layer 40 of 48, "
         "scaled to the model)", "prefill", S000, 0, 1 << 16, unit="experts"),
    Knob("prompt_hot", "STRATA_PROMPT_HOT", bool, True,
         "prefill: victims come from outside the prompt-hot set first, then fall back; the "
         "set leaves 2*top_k+32 slots at the tail", "prefill", S000, search=(False, True)),
    # io
    Knob("expert_store", "STRATA_EXPERT_STORE", str, "disk",
         "where misses come from: disk = read from the checkpoint's files by the readers "
         "(io_reader; an SSD, or the page cache); ram = every expert held in page-locked host "
         "memory from the start, so a miss is one copy over the link and no read", "io", "-",
         choices=("disk", "ram"), restart=True),
    Knob("miss_direct", "STRATA_MISS_DIRECT", bool, True,
         "with expert_store = ram: 1 = a layer reads a miss in place from host memory (on a "
         "GPU its kernels, over the link), with no wait for the host to learn of it, and "
         "the host keeps it in the arena from the bytes the layer read; 0 = the host "
         "copies it in and the layer is computed again. With the disk store on a GPU: 1 = "
         "the layer's second pass reads its misses in place from the pinned buffers they "
         "were read into; 0 = each is uploaded into its row first", "io", "-", restart=True),
    Knob("io_reader", "STRATA_IO_READER", str, "auto",
         "how the disk store reads experts: threads = reader threads in Python (os.preadv), "
         "anywhere; kvikio = NVIDIA KvikIO's C++ thread pool, driven from the decode thread "
         "with no Python thread per read (needs the gpu extra and a CUDA driver); auto = "
         "kvikio on a CUDA device where it reads, else threads",
         "io", "-", choices=("auto", "threads", "kvikio"), restart=True),
    Knob("io_workers", "STRATA_IO_WORKERS", int, 8,
         "reader threads", "io", S000, 1, 64, unit="threads", restart=True,
         search=(4, 16)),
    Knob("io_urgent", "STRATA_IO_URGENT", int, 2,
         "reader threads reserved for demand reads", "io", S000, 0, 63, unit="threads",
         restart=True,
         search=(0, 3)),
    Knob("io_direct", "STRATA_IO_DIRECT", bool, False,
         "read experts with O_DIRECT so reads bypass the page cache", "io", "-",
         restart=True),
    Knob("io_piece_kib", "STRATA_IO_PIECE_KIB", int, 256,
         "size of one read job; an expert read is split into pieces of this size", "io",
         S000, 4, 65536, unit="KiB", restart=True),
    Knob("verify_reads", "STRATA_VERIFY_READS", int, 0,
         "check every expert read before it is used: 1 = its size and that every value is "
         "finite; 2 = also its CRC-32 against one recorded for every expert when the engine "
         "is built", "io", "-", 0, 2, restart=True),
    Knob("io_jitter_ms", "STRATA_IO_JITTER_MS", float, 0.0,
         "random extra delay per read piece, up to this much (tests that timing never "
         "leaks into residency)", "io", S000, 0.0, 1000.0, unit="ms"),
    # tiers
    Knob("cpu_pool", "STRATA_CPU_POOL", bool, False,
         "three execution sites: misses are computed over the link or on the CPU from host "
         "RAM instead of streamed into the arena; residency moves only by the adaptive tier "
         "and adapt-fetch admissions", "tiers", S002),
    Knob("pcie_frac", "STRATA_PCIE_FRAC", float, 0.0,
         "share of a layer's misses sent over the link, the rest to the CPU site "
         "(with cpu_pool)", "tiers", S002, 0.0, 1.0),
    Knob("adapt_fetch", "STRATA_ADAPT_FETCH", int, 0,
         "1: the link share takes the most-routed misses and can admit them into the arena; "
         "2: as 1, and the tier skips layers where an admission ran", "tiers", S003, 0, 2),
    Knob("adapt_fetch_min", "STRATA_ADAPT_FETCH_MIN", float, 1.0,
         "decayed routing count a fetched expert needs to be admitted", "tiers", S003,
         0.0, 1e6),
    Knob("adapt_fetch_margin", "STRATA_ADAPT_FETCH_MARGIN", float, 0.5,
         "how much more routed than the displaced resident an admitted expert must be",
         "tiers", S003, 0.0, 1e6),
    Knob("adapt_fetch_verify", "STRATA_ADAPT_FETCH_VERIFY", bool, False,
         "read every admitted slot back and compare it with the expert's bytes",
         "tiers", S003),
    Knob("adapt_every", "STRATA_ADAPT_EVERY", int, 0,
         "adaptive tier round length: every this many tokens the most-routed non-residents "
         "replace the least-routed residents (0 = tier off)", "tiers", S003, 0, 1_000_000,
         unit="tokens"),
    Knob("adapt_decay", "STRATA_ADAPT_DECAY", float, 0.95,
         "per-token decay of the per-layer routing counts", "tiers", S003, 0.0, 1.0),
    Knob("adapt_overlap", "STRATA_ADAPT_OVERLAP", bool, False,
         "the adaptive tier's swaps overlap decoding (an engine setting this engine does "
         "not model: its tier runs at token boundaries); set, it turns adapt-fetch off, as "
         "seed 003 does", "tiers", S003),
    Knob("adapt_checkres", "STRATA_ADAPT_CHECKRES", bool, False,
         "after every token compare the router's residency with the arena's slot map, per "
         "layer, counting windows checked and mismatches", "tiers", S003),
    # hardware emulation. At the floor, 10 MB/s, a demo-model token's misses (about 40 MB)
    # take about 4 s; below it one token could take minutes.
    Knob("ssd_gbps", "STRATA_SSD_GBPS", float, 0.0,
         "emulated store read bandwidth (0 = real speed)", "hardware", S002, MIN_GBPS, 1e4,
         unit="GB/s", off=0.0),
    Knob("link_gbps", "STRATA_LINK_GBPS", float, 0.0,
         "emulated host-to-device link bandwidth (0 = real speed)", "hardware", S002,
         MIN_GBPS, 1e4, unit="GB/s", off=0.0),
    Knob("cpu_gbps", "STRATA_CPU_GBPS", float, 0.0,
         "emulated CPU-site expert bandwidth (0 = real speed)", "hardware", S002, MIN_GBPS,
         1e4, unit="GB/s", off=0.0),
    # One token's matrices are small: splitting them over threads costs more than it
    # saves on a small machine (on 2 cores one thread decodes the demo model about 20 %
    # faster than two), and the cores are also wanted by the readers and the UIs.
    Knob("threads", "STRATA_THREADS", int, 1,
         "compute threads of the thread that decodes (torch intra-op threads; 0 = torch's "
         "default, one per core)", "hardware", "-", 0, 1024),
    # session
    Knob("model", "STRATA_MODEL", str, "",
         "model folder (empty = the embedded default model)", "session", "-", restart=True,
         path=True),
    Knob("routing", "STRATA_ROUTING", str, "",
         "routing trace (.npz) that routes every layer, token by token and sequence by "
         "sequence, looping, while the experts are read and computed for real (empty = the "
         "model's own routers; the model must have the trace's shape: tuner model make "
         "--like)", "session", "-", restart=True, path=True),
    Knob("workload", "STRATA_WORKLOAD", str, "corpus",
         "what the session decodes: corpus (endless built-in prompts), chat-cold, "
         "chat-warm, shifted, long-prompt, or a JSON-lines file of prompts", "session",
         "-", restart=True, path=True),
    Knob("device", "STRATA_DEVICE", str, "auto",
         "compute device of the arena and the dense weights (auto = cuda when present)",
         "session", "-", choices=("auto", "cpu", "cuda"), restart=True),
    Knob("seed", "STRATA_SEED", int, 0,
         "seed for the prompt corpus and sampling", "session", "-", 0, 2**31 - 1,
         restart=True),
    Knob("temperature", "STRATA_TEMPERATURE", float, 0.8,
         "sampling temperature (0 = greedy)", "session", "-", 0.0, 10.0),
    Knob("context", "STRATA_CONTEXT", int, 256,
         "tokens per conversation before the session starts the next prompt", "session",
         "-", 8, 65536, unit="tokens", restart=True),
    Knob("quality_every", "STRATA_QUALITY_EVERY", int, 0,
         "quality probe: every this many tokens the exact output (exact top-k, nothing "
         "dropped) is computed beside the served one, off the timed path, for KL and top-1 "
         "agreement (0 = off)", "session", "-", 0, 1_000_000, unit="tokens"),
    Knob("window", "STRATA_WINDOW", int, 64,
         "sliding window of the windowed counters: the newest steps that hold this many "
         "tokens (a prompt prefilled in one batch is one step, kept whole, so the window "
         "holds more while a prompt straddles its start)", "session", "-", 1, 4096,
         unit="tokens", restart=True),
)

BY_NAME: dict[str, Knob] = {k.name: k for k in KNOBS}
BY_ENV: dict[str, Knob] = {k.env: k for k in KNOBS}


@dataclass(frozen=True)
class Alias:
    """An older knob that still works in presets, the environment, on the command line and
    in changes: each of its values stands for a value of the knob that replaced it. It is
    parsed and named in messages as it always was (`old`), and nothing outputs it."""

    old: Knob
    knob: str  # the knob that replaced it
    means: tuple[tuple[Any, Any], ...]  # (old value, the knob's value)

    def value(self, old: Any) -> Any:
        """The knob's value `old` stands for (KeyError when it stands for none)."""
        return dict(self.means)[old]


ALIASES: tuple[Alias, ...] = (
    Alias(Knob("decode_2q", "STRATA_METAL_DECODE_2Q", bool, False,
               "older name of cache_policy: 1 = 2q, 0 = lru", "cache", S000),
          "cache_policy", ((False, "lru"), (True, "2q"))),
)
ALIAS_OF: dict[str, Alias] = {key: a for a in ALIASES for key in (a.old.name, a.old.env)}
# Every knob an input can name: the table's, then the older names still accepted.
INPUT_KNOBS: tuple[Knob, ...] = KNOBS + tuple(a.old for a in ALIASES)
LOSSY = tuple(k.name for k in KNOBS if k.lossy)  # knobs that may change the output


def lossy_total(settings: Any) -> float:
    """The lossy knobs' values summed: 0 for settings whose output is exact."""
    return float(sum(getattr(settings, name) for name in LOSSY))


def knob_flag(name: str) -> str:
    """The knob's command-line flag."""
    return f"--{name.replace('_', '-')}"


def lookup(key: str) -> Knob | None:
    """A knob by its name or its STRATA_* alias."""
    return BY_NAME.get(key) or BY_ENV.get(key)


def even_budgets(slots: int, layers: int) -> list[int]:
    """`slots` shared as evenly as whole slots allow, the remainder to the first layers."""
    return [slots // layers + (l < slots % layers) for l in range(layers)]


def written(value: Any) -> Any:
    """A knob's value as plain data (JSON, preset files, env lines, forms): a tuple knob's
    whole numbers as the text "3,3,2" they are typed as, any other value as it is."""
    return ",".join(map(str, value)) if isinstance(value, tuple | list) else value


def config_dict(cfg: Config) -> dict[str, Any]:
    """The knob values of `cfg` as plain data (`written`): what snapshots and states carry."""
    return {f.name: written(getattr(cfg, f.name)) for f in fields(cfg)}


CONFIG_PATH = Path(__file__).with_name("config.py")
CONFIG_HEAD = '''"""The engine's settings: one typed field per knob, with its default.

Generated from the knob table by `python -m tuner.knobs --write-config`: edit tuner/knobs.py,
not this file (a test fails when the two differ). Standard library only, so the engine and a
type checker read it without the settings library.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """Validated knob values as the engine reads them (tuner.settings validates them)."""'''


def config_source() -> str:
    """The text of tuner/config.py: the knobs in table order, under their groups (what each
    does is its help in the table: `tuner knobs`)."""
    lines, group = [CONFIG_HEAD], None
    for k in KNOBS:
        if k.group != group:
            group = k.group
            lines.append(f"\n    # -- {group} " + "-" * (86 - len(group)))
        default = f'"{k.default}"' if k.type is str else repr(k.default)
        lines.append(f"    {k.name}: {k.annotation} = {default}")
    return "\n".join(lines) + "\n"


def _write_config() -> None:
    if sys.argv[1:] != ["--write-config"]:
        raise CommandError("usage: python -m tuner.knobs --write-config (writes "
                           "tuner/config.py from the knob table)")
    CONFIG_PATH.write_text(config_source())


if __name__ == "__main__":
    sys.exit(run("python -m tuner.knobs", _write_config))
