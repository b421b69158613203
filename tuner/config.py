"""The engine's settings: one typed field per knob, with its default.

Generated from the knob table by `python -m tuner.knobs --write-config`: edit tuner/knobs.py,
not this file (a test fails when the two differ). Standard library only, so the engine and a
type checker read it without the settings library.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """Validated knob values as the engine reads them (tuner.settings validates them)."""

    # -- routing -------------------------------------------------------------------------------
    # resident bonus b added to the logit of resident experts after the protected picks; 0 =
    # exact routing (bit-identical output)
    moce_bonus: float = 0.0
    # picks made by raw logit before the bonus applies
    moce_protect: int = 3
    # resident preference from rank 1 up to protect
    moce_bonus_r1: float = 0.0
    # drop-cold-experts: a routed expert that misses with a routing weight (softmax over the
    # selected top-k) below this is neither read nor computed; the top-weighted expert is always
    # kept, and prefetch skips predictions it would drop (0 = off)
    drop_cold: float = 0.0

    # -- prefetch ------------------------------------------------------------------------------
    # predictor whose guesses for the next layer are read ahead
    prefetch: str = "off"
    # predicted misses speculated per layer (0 = all)
    prefetch_max: int = 2
    # 1 = predict the raw top-k; 0 = ranks >= 3 predicted with the resident bonus
    prefetch_unpert: bool = True
    # predict the set the moce router will pick (protect, bonus_r1); off when bonus <= 0
    prefetch_route: bool = False
    # a speculative hit on a resident expert promotes it in the cache order
    prefetch_touch: bool = False

    # -- cache ---------------------------------------------------------------------------------
    # the arena's eviction order: lru = least recently claimed first; 2q = two-hit protected
    # LRU: fresh slots start cold, the second claim promotes
    cache_policy: str = "lru"
    # arena slots (0 = 20 % of the model's layer-expert pairs)
    expert_cache: int = 0
    # global: one arena shared by all layers; layers: each layer has a slot quota
    # (arena_budgets) and evicts within it
    arena_split: str = "global"
    # slot quota of each layer with arena_split = layers, summing to the arena (empty = an even
    # split); `tuner budgets` computes them from hit curves
    arena_budgets: str = ""

    # -- prefill -------------------------------------------------------------------------------
    # a prompt of more than 8 tokens runs as one batch: per layer the union of its routed
    # experts is served once; 0 = token by token through the decode path
    prefill: bool = True
    # prefill: experts of a layer's ranked union streamed into the arena, the rest computed from
    # staging (0 = the seed's 256 of 512 experts, 128 from layer 40 of 48, scaled to the model)
    prompt_max_pre: int = 0
    # prefill: victims come from outside the prompt-hot set first, then fall back; the set
    # leaves 2*top_k+32 slots at the tail
    prompt_hot: bool = True

    # -- io ------------------------------------------------------------------------------------
    # where misses come from: disk = read from the checkpoint's files by the reader threads (an
    # SSD, or the page cache); ram = every expert held in page-locked host memory from the
    # start, so a miss is one copy over the link and no read
    expert_store: str = "disk"
    # reader threads
    io_workers: int = 8
    # reader threads reserved for demand reads
    io_urgent: int = 2
    # read experts with O_DIRECT so reads bypass the page cache
    io_direct: bool = False
    # size of one read job; an expert read is split into pieces of this size
    io_piece_kib: int = 256
    # check every expert read before it is used: 1 = its size and that every value is finite; 2
    # = also its CRC-32 against one recorded for every expert when the engine is built
    verify_reads: int = 0
    # random extra delay per read piece, up to this much (tests that timing never leaks into
    # residency)
    io_jitter_ms: float = 0.0

    # -- tiers ---------------------------------------------------------------------------------
    # three execution sites: misses are computed over the link or on the CPU from host RAM
    # instead of streamed into the arena; residency moves only by the adaptive tier and adapt-
    # fetch admissions
    cpu_pool: bool = False
    # share of a layer's misses sent over the link, the rest to the CPU site (with cpu_pool)
    pcie_frac: float = 0.0
    # 1: the link share takes the most-routed misses and can admit them into the arena; 2: as 1,
    # and the tier skips layers where an admission ran
    adapt_fetch: int = 0
    # decayed routing count a fetched expert needs to be admitted
    adapt_fetch_min: float = 1.0
    # how much more routed than the displaced resident an admitted expert must be
    adapt_fetch_margin: float = 0.5
    # read every admitted slot back and compare it with the expert's bytes
    adapt_fetch_verify: bool = False
    # adaptive tier round length: every this many tokens the most-routed non-residents replace
    # the least-routed residents (0 = tier off)
    adapt_every: int = 0
    # per-token decay of the per-layer routing counts
    adapt_decay: float = 0.95
    # the adaptive tier's swaps overlap decoding (an engine setting this engine does not model:
    # its tier runs at token boundaries); set, it turns adapt-fetch off, as seed 003 does
    adapt_overlap: bool = False
    # after every token compare the router's residency with the arena's slot map, per layer,
    # counting windows checked and mismatches
    adapt_checkres: bool = False

    # -- hardware ------------------------------------------------------------------------------
    # emulated store read bandwidth (0 = real speed)
    ssd_gbps: float = 0.0
    # emulated host-to-device link bandwidth (0 = real speed)
    link_gbps: float = 0.0
    # emulated CPU-site expert bandwidth (0 = real speed)
    cpu_gbps: float = 0.0
    # compute threads of the thread that decodes (torch intra-op threads; 0 = torch's default,
    # one per core)
    threads: int = 1

    # -- session -------------------------------------------------------------------------------
    # model folder (empty = the embedded default model)
    model: str = ""
    # routing trace (.npz) that routes every layer, token by token and sequence by sequence,
    # looping, while the experts are read and computed for real (empty = the model's own
    # routers; the model must have the trace's shape: tuner model make --like)
    routing: str = ""
    # what the session decodes: corpus (endless built-in prompts), chat-cold, chat-warm,
    # shifted, long-prompt, or a JSON-lines file of prompts
    workload: str = "corpus"
    # compute device of the arena and the dense weights (auto = cuda when present)
    device: str = "auto"
    # seed for the prompt corpus and sampling
    seed: int = 0
    # sampling temperature (0 = greedy)
    temperature: float = 0.8
    # tokens per conversation before the session starts the next prompt
    context: int = 256
    # quality probe: every this many tokens the exact output (exact top-k, nothing dropped) is
    # computed beside the served one, off the timed path, for KL and top-1 agreement (0 = off)
    quality_every: int = 0
    # sliding window of the windowed counters (each token keeps a copy of the counters)
    window: int = 64
