"""Batched prefill: a prompt's T tokens through every layer together (seed 000 section 3).

Per layer: attention over the T tokens with a causal mask fills the KV cache; the router
picks each token's experts; the union of those experts is ranked by how many tokens route
to each (ties by id) and served once, in groups of k, through the decode path's claim and
land steps:

* layer-ranked streaming: the first `prompt_max_pre` experts of the ranked union are
  streamed into the arena (hits stay, misses take victims); the rest are read into
  staging rows, computed and not kept, so one long prompt does not flush the arena. No
  predicted candidates are read ahead while a prompt runs. The seed's defaults, 256 of
  512 experts for layers below 40 of 48 and 128 from there, are scaled to the model.
* prompt-hot protection (`prompt_hot`): the prompt's most-routed (layer, expert) pairs so
  far are protected: victims are sought outside them first, then among them. The set
  leaves 2*k+32 slots for the tail of the victim order, so decode after the prompt always
  finds victims.

Each expert of a group is computed on its own tokens ([k, T_max, D], padded) and the
outputs are added into the tokens' rows weighted by their routing weights. The sums run
in another order than decode's per-token rank-order sum, so logits differ from the
token-by-token path in the last bits (tests bound it); greedy tokens agree.
"""

from __future__ import annotations

import numpy as np
import torch

from tuner.config import Config
from tuner.engine.weights import router
from tuner.engine.weights.model import experts_out
from tuner.vocabulary.counters import C

PROMPT_BATCH = 8  # a prompt of more tokens is batched (the seed's T > 8)


def prompt_cap(cfg: Config, layer: int, layers: int, experts: int) -> int:
    """Experts of layer `layer`'s ranked union streamed into the arena."""
    if cfg.prompt_max_pre:
        return cfg.prompt_max_pre
    late = layer >= round(layers * 40 / 48)
    return max(1, round(experts * (128 if late else 256) / 512))


def tail_reserve(top_k: int) -> int:
    """Slots the prompt-hot set leaves unprotected (the seed's 2*ne+32)."""
    return 2 * top_k + 32


def prefill(engine, tokens: list[int], pos: int) -> torch.Tensor:
    """Runs `tokens` from position `pos` through the model together; returns the last
    token's logits [V]."""
    dec, mc = engine.dec, engine.mc
    L, K, T = mc.num_layers, mc.top_k, len(tokens)
    sel_log = np.full((T, L, K), -1, dtype=np.int32)  # per-expert log, token by token
    miss_log = np.zeros((T, L, K), dtype=bool)
    hot: dict[tuple[int, int], int] = {}
    h = dec.embed_tokens(tokens)  # [T, D]
    try:
        for l in range(L):
            h = dec.attention(l, h, pos)
            x = dec.moe_input(l, h)
            with engine.clock.span(l, C.layer_ms):
                h = _layer(engine, l, x, h, sel_log, miss_log, hot)
    finally:
        engine.slots.protected = set()
    logits = dec.logits(h)
    engine.clock.flush()
    engine.counters.per_expert.add_tokens(sel_log, miss_log)
    return logits


def _layer(engine, l: int, x: torch.Tensor, h: torch.Tensor, sel_log: np.ndarray,
           miss_log: np.ndarray, hot: dict) -> torch.Tensor:
    """One layer's MoE block for T tokens x [T, D]; returns the new residual."""
    cfg, mc, dec, add = engine.cfg, engine.mc, engine.dec, engine.counters.add
    E, K, T, D = mc.num_experts, mc.top_k, x.shape[0], x.shape[1]
    logits = dec.router_logits(l, x)  # [T, E]
    engine.spec.arrived(l)
    mask = engine.arena.mask(l) if engine.use_residency else None
    selected = router.select(logits, mask, K, cfg.moce_protect, cfg.moce_bonus,
                             cfg.moce_bonus_r1)  # [T, K]
    weights = router.weights(logits, selected, mc.norm_topk_prob)  # [T, K]
    sel = selected.cpu().numpy()  # the layer's one sync
    sel_log[:, l] = sel
    add(l, C.routings, sel.size)
    engine.probe.prev[l] = sel[-1].tolist()
    counts = np.bincount(sel.ravel(), minlength=E)
    used = np.flatnonzero(counts)
    ranked = used[np.lexsort((used, -counts[used]))].tolist()  # most routed first
    cap = prompt_cap(cfg, l, mc.num_layers, E)
    streamed, through = ranked[:cap], ranked[cap:]
    add(l, C.prompt_streamed, len(streamed))
    add(l, C.prompt_through, len(through))
    if cfg.prompt_hot:
        _protect(engine, l, streamed, counts, hot)
    # where each expert's (token, rank) entries are: sorted by expert id
    flat = sel.ravel()
    order = np.argsort(flat, kind="stable")
    start = np.concatenate([[0], np.cumsum(np.bincount(flat, minlength=E))])
    x_pad = torch.cat([x, x.new_zeros(1, D)])  # row T: padding
    # Each (token, rank) entry's expert output lands in its own row, then every token sums
    # its k rows in rank order as decode does: an index_add_ of the weighted outputs would
    # add them in whatever order CUDA's atomics run, and round differently run to run.
    outs = x.new_zeros(T * K + 1, D)  # row T*K: padding, written many times, never read
    fallbacks = engine.slots.hot_fallbacks
    for part, stream in ((streamed, True), (through, False)):
        for g in range(0, len(part), K):
            group = part[g:g + K]
            rows, timely, waited, missed = engine.work.claim(l, group, stream=stream)
            entries = [order[start[e]:start[e + 1]] for e in group]  # flat (t*K + r)
            for r in missed:
                first = entries[r][0]
                miss_log[first // K, l, first % K] = True
            engine.work.land(l, timely, waited)
            width = max(len(e) for e in entries)
            idx = np.full((len(group), width), T * K, dtype=np.int64)  # padding entry
            for j, e in enumerate(entries):
                idx[j, :len(e)] = e
            idx_t = torch.from_numpy(idx).to(x.device)
            tok = torch.where(idx_t < T * K, idx_t // K, T)  # [g, width] token rows
            rows_t = torch.tensor(rows, dtype=torch.int64, device=x.device)
            # [g, width, D]
            out = experts_out(x_pad[tok], engine.arena.gather_index(rows_t, x.dtype))
            outs[idx_t.reshape(-1)] = out.reshape(-1, D)
    add(l, C.hot_fallbacks, engine.slots.hot_fallbacks - fallbacks)
    y = weights.to(outs.dtype)[:, None, :] @ outs[:T * K].view(T, K, D)  # [T, 1, D]
    h = h + dec.shared_output(l, x, y[:, 0])
    engine.work.retire(l)
    return h


def _protect(engine, layer: int, streamed: list[int], counts: np.ndarray,
             hot: dict) -> None:
    """Adds this layer's streamed experts to the prompt-hot set and keeps its most-routed
    pairs protected, as many as leave the tail reservation free."""
    for e in streamed:
        hot[(layer, e)] = int(counts[e])
    slots = engine.slots
    budget = max(0, slots.n - tail_reserve(engine.mc.top_k))
    ranked = sorted(hot, key=lambda key: (-hot[key], key))
    slots.protected = set(ranked[:budget])
