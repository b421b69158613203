"""The streaming decode step: one token through every layer, experts served by the arena.

Where the model's routers route and misses stream into the arena, a layer's device work
runs first, without the host (device_step.py: on CUDA one graph replay a layer): it
routes, finds the resident experts in the device's table and computes the layer. The host
then reads the layer's routing and does steps 1-5 below on it; when the device found every
expert (every lookup a hit) its output stands and, on CUDA, the next layer was already
launched before the host's bookkeeping, so the hit path never waits on the host. Otherwise
the layer's experts are computed again once the misses landed (`fix`), with the same
kernels, so the output is bit for bit what computing them together gives. With the RAM
store (`miss_direct`) the body reads its misses in place from host memory, its output
stands, and the host only keeps them in the arena (on CUDA from the bytes the body landed).
The three sites (`cpu_pool`), a routing trace and a route recording take the host-driven
path instead, where the host routes each layer before its experts are computed.

Per layer (seed 000 section 3, `at_layer` and `after_layer`):

1. route (exact or moce against the published residency), and in the same host sync fetch
   the predictor probe's control ranking and layer l+1's router applied to this input;
   with drop_cold, misses of low routing weight are dropped here (drop.py);
2. claim: pin the wanted residents, claim wanted speculation (timely when its read is
   complete, late when still in flight: promoted to urgent and waited for), then take a
   victim slot for each miss in rank order and issue its demand read;
3. speculate: read ahead the predicted misses of the next layer (prefetch off/prev/stale),
   less those drop_cold would drop;
4. land the layer's reads (on CUDA: uploaded together), gather the routed experts' rows
   into one batch and compute it, summed in rank order, so the output never depends on
   which read finished first;
5. retire the layer's unclaimed speculation into limbo; release the previous limbo
   generation (after waiting for its running reads). Release points are fixed, so read
   timing never leaks into residency.

`Engine` orders these steps; the arena (arena.py) owns the memory and the slot map, the
speculator (speculate.py) speculation and limbo, and the three-site path of `cpu_pool`
lives in tiers.py. The quality probe (quality.py) runs the exact model on sampled tokens
before `step`, outside the token's timing (`exact_first`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import torch

from tuner.config import Config
from tuner.engine import drop, router
from tuner.engine.arena import Arena, Fetch
from tuner.engine.checkpoint import Checkpoint
from tuner.engine.clock import clock_for
from tuner.engine.counters import Counters
from tuner.engine.device_step import DeviceStep, Pack, Route
from tuner.engine.experts import LANDING_SETS
from tuner.engine.host_copy import HostCopy
from tuner.engine.model import Decoder, compute_dtype
from tuner.engine.predict import predict
from tuner.engine.prefill import PROMPT_BATCH, prefill
from tuner.engine.quality import QualityProbe
from tuner.engine.routing_source import TraceRouting, open_routing
from tuner.engine.slots import BYPASS, CLAIMED_SPEC, HIT, RESIDENT, arena_slots, quotas_for
from tuner.engine.speculate import Speculator
from tuner.engine.tiers import Sites, Tier
from tuner.engine.verify import Verifier


@dataclass
class RouteLog:
    """Every routing the engine made, for trace recording: expert ids per layer and token
    in rank order, optionally the router logits, and the tokens where conversations start."""

    layers: int
    keep_logits: bool = False
    experts: list[list[int]] = field(default_factory=list)
    logits: list[np.ndarray] = field(default_factory=list)
    stale: list[np.ndarray] = field(default_factory=list)  # NaN where there is none
    starts: list[int] = field(default_factory=list)

    def add(self, sel: list[int], logits: torch.Tensor, stale: np.ndarray | None) -> None:
        self.experts.append(sel)
        if self.keep_logits:
            self.logits.append(logits.detach().float().cpu().numpy())
            self.stale.append(np.full(len(logits), np.nan, dtype=np.float32) if stale is None
                              else stale.astype(np.float32))

    def start(self) -> None:
        self.starts.append(len(self.experts) // self.layers)


@dataclass
class Routed:
    """One layer's routing as the host sees it after the layer's single sync."""

    sel: list[int]  # expert ids in rank order (a trace may leave a layer without any)
    selected: torch.Tensor | None  # the same on the compute device (the host-driven path)
    ctrl: list[int] | None  # the probe's control: this layer's router on its input, top-k
    stale_next: np.ndarray | None  # layer l+1's router on this input [E], on the host
    scores: np.ndarray | None = None  # the selected experts' logits [k], host (drop_cold)


def _top(logits: np.ndarray, k: int) -> list[int]:
    """The k largest entries' ids, in no particular order (the probe scores sets)."""
    return np.argpartition(-logits, k - 1)[:k].tolist()


class Engine:
    def __init__(self, ckpt: Checkpoint, cfg: Config, device: torch.device):
        mc = ckpt.config
        self.ckpt, self.mc, self.cfg, self.device = ckpt, mc, cfg, device
        self.dtype = compute_dtype(ckpt.dtype, device)
        self.dec = Decoder(mc, ckpt.dense(), cfg.context, device, self.dtype)
        L, E, K = mc.num_layers, mc.num_experts, mc.top_k
        self.cuda = device.type == "cuda"
        self.counters = Counters(L, E, K, cfg.window)
        self.clock = clock_for(device, self.counters)
        self.hurry = threading.Event()  # set: emulated bandwidths stop pacing (see store)
        self.check = Verifier(ckpt, cfg.verify_reads).check if cfg.verify_reads else None
        n = arena_slots(cfg.expert_cache, L, E)
        quotas = quotas_for(cfg.arena_split, cfg.arena_budgets, L, n)  # before any thread
        self.arena = Arena(ckpt, n, cfg.cache_policy, device, cfg, self.clock,
                           quotas=quotas, check=self.check, hurry=self.hurry)
        self.slots, self.pool = self.arena.slots, self.arena.pool
        self.spec = Speculator(self.arena, self.counters, L)
        self.prev_sel: list[list[int] | None] = [None] * L
        self.route_log: RouteLog | None = None  # set one to record routings
        self.routing = open_routing(cfg.routing, L, E, K)  # None: the model's routers route
        self.tier = Tier(L, E, self.slots)
        self.sites: Sites | None = None  # made when cpu_pool is first switched on
        self.quality: QualityProbe | None = None  # made when quality_every is first set
        self.device_step: DeviceStep | None = None  # made when the device path first runs
        self._launched: list[tuple[int, int] | None] = [None] * L
        self.steps = 0
        self.apply_live(cfg)

    # -- settings ----------------------------------------------------------------------
    def apply_live(self, cfg: Config) -> None:
        """Takes the live knobs of `cfg` (called between tokens only); raises ValueError,
        having changed nothing, when they do not fit this model and arena."""
        quotas = quotas_for(cfg.arena_split, cfg.arena_budgets, self.mc.num_layers,
                            self.slots.n)
        if cfg.cpu_pool and self.sites is None:
            self.drain()  # no speculation in flight once misses stop streaming
            host = self.arena.host or HostCopy(self.ckpt, pin=self.cuda, check=self.check)
            self.sites = Sites(self.arena, host,
                               self.tier, self.counters, self.clock, self.hurry)
        self.cfg = cfg
        self.pool.ssd.gbps = cfg.ssd_gbps
        self.pool.jitter_ms = cfg.io_jitter_ms
        if self.sites:
            self.sites.link_line.gbps = cfg.link_gbps
            self.sites.cpu_line.gbps = cfg.cpu_gbps
        self.slots.set_policy(cfg.cache_policy)
        self.slots.quotas = quotas
        self.use_residency = cfg.moce_bonus > 0 or cfg.moce_bonus_r1 > 0
        self.dropping = cfg.drop_cold > 0 and not cfg.cpu_pool
        if cfg.quality_every and self.quality is None:
            self.quality = QualityProbe(self.ckpt, self.dec, self.counters, cfg)
        self.adapt_fetch = (cfg.cpu_pool and cfg.adapt_fetch > 0 and cfg.pcie_frac > 0
                            and not cfg.adapt_overlap)
        if self.device_step is not None:
            self.device_step.set_route(self._route_spec())

    def _route_spec(self) -> Route:
        cfg = self.cfg
        if not self.use_residency:  # exact top-k: the moce knobs change nothing
            return Route(probes=True, scores=self.dropping)
        return Route(True, cfg.moce_protect, cfg.moce_bonus, cfg.moce_bonus_r1, probes=True,
                     scores=self.dropping)

    def notes(self) -> list[str]:
        cfg, out = self.cfg, []
        if cfg.prefetch_route and cfg.moce_bonus <= 0:
            out.append("prefetch_route is off: it needs moce_bonus > 0")
        if cfg.expert_cache > self.slots.n:
            out.append(f"expert_cache {cfg.expert_cache} capped at {self.slots.n}: "
                       "the model has no more layer-expert pairs")
        if not cfg.cpu_pool and (cfg.pcie_frac or cfg.adapt_fetch or cfg.adapt_every):
            out.append("pcie_frac, adapt_fetch and adapt_every act only with cpu_pool = 1")
        if cfg.cpu_pool and cfg.prefetch != "off":
            out.append("prefetch is off with cpu_pool: misses are not streamed into the arena")
        if cfg.adapt_fetch and cfg.adapt_overlap:
            out.append("adapt_fetch is off: adapt_overlap = 1 (seed 003: admissions write "
                       "the residency the overlapped tier is swapping)")
        if cfg.prefill and not self.batched_prefill():
            out.append("prompts run token by token: batched prefill does not serve "
                       "cpu_pool, a routing trace or a route recording")
        if cfg.cpu_pool and cfg.adapt_fetch and not cfg.pcie_frac:
            out.append("adapt_fetch is off: there is no link share (pcie_frac = 0)")
        if cfg.cpu_pool and not cfg.adapt_every and not self.adapt_fetch:
            out.append("with cpu_pool the arena changes only by the adaptive tier "
                       "(adapt_every) and adapt-fetch; both are off")
        if cfg.arena_budgets and cfg.arena_split != "layers":
            out.append("arena_budgets act only with arena_split = layers")
        if cfg.moce_protect > self.mc.top_k:
            out.append(f"moce_protect {cfg.moce_protect} acts as {self.mc.top_k} (top-k)")
        if self.routing is not None:
            out.extend(self.routing.notes(cfg))
        if cfg.expert_store == "ram" and (cfg.ssd_gbps or cfg.io_direct or cfg.io_jitter_ms):
            out.append("ssd_gbps, io_direct and io_jitter_ms act on reads; with expert_store "
                       "= ram a miss is a copy from host memory, not a read")
        if cfg.miss_direct and cfg.expert_store == "ram" and self.cuda and not self.arena.direct:
            out.append("miss_direct is off: quantized experts are computed by the batched "
                       "products, which read the arena only")
        if cfg.drop_cold and cfg.cpu_pool:
            out.append("drop_cold is off with cpu_pool: it drops streamed misses only")
        if self.dropping:
            out.append("drop_cold is on: the predictors are scored against the experts "
                       "computed, so ctrl reads below 100 % by the dropped share; read prev "
                       "and stale against ctrl, not against 100 %")
        if (self.use_residency or self.dropping or self.routing) and not cfg.quality_every:
            out.append("the output differs from exact routing; quality_every > 0 measures "
                       "what that costs (KL, top-1 agreement)")
        return out

    def reset_counters(self) -> None:
        self.counters.clear()

    def resident_counts(self) -> list[int]:
        return [self.slots.resident_per_layer[l] for l in range(self.mc.num_layers)]

    def resident_map(self) -> np.ndarray:
        """[L, E] bool: which experts are resident now (the router's own residency mask)."""
        return self.arena.mask_host.numpy().copy()

    # -- one token ---------------------------------------------------------------------
    def reset_sequence(self) -> None:
        """A new conversation: the prev-token predictor has nothing to go on."""
        self.prev_sel = [None] * self.mc.num_layers
        if self.route_log is not None:
            self.route_log.start()

    def exact_first(self, token: int, pos: int) -> torch.Tensor | None:
        """On a token the quality probe samples, the exact logits of `token` at `pos`; run
        before `step` of the same position, outside its timing. None on other tokens."""
        every = self.cfg.quality_every
        if not every or self.steps % every:
            return None
        assert self.quality is not None  # made when quality_every was first set
        return self.quality.exact(token, pos)

    @torch.inference_mode()
    def step(self, token: int, pos: int) -> torch.Tensor:
        """Runs one token at position `pos`; returns its logits [V] (float32)."""
        cfg = self.cfg
        if cfg.cpu_pool and cfg.adapt_every and self.steps and self.steps % cfg.adapt_every == 0:
            assert self.sites is not None  # made when cpu_pool was first switched on
            self.sites.tier_round(cfg, self.adapt_fetch)
        self.steps += 1
        if cfg.cpu_pool or self.routing is not None or self.route_log is not None:
            logits = self._host_step(token, pos)
        else:
            logits = self._device_first(token, pos)
        self.clock.flush()  # queued after the logits, so it waits on the layers' timings
        if self.routing is not None:
            self.routing.advance()
        self.check_residency()
        return logits

    def _host_step(self, token: int, pos: int) -> torch.Tensor:
        """The host routes each layer before its experts are computed."""
        dec = self.dec
        h = dec.embed_token(token)
        stale: np.ndarray | None = None  # layer l's router on layer l-1's input, host
        for l in range(self.mc.num_layers):
            h = dec.attention(l, h, pos)
            x = dec.moe_input(l, h)
            with self.clock.span(l, "layer_ms"):
                h, stale = self._moe(l, x, h, stale)
        return dec.logits(h)

    def _device_first(self, token: int, pos: int) -> torch.Tensor:
        """Each layer's device work first, the host's after it (see the module's doc)."""
        if self.device_step is None:
            self.device_step = DeviceStep(self.dec, self.arena.experts, self.arena.table.dev,
                                          self.arena.residency.dev, self._route_spec())
        run, L, launched, cfg = self.device_step, self.mc.num_layers, self._launched, self.cfg
        launched[:] = [None] * L
        # layers queued ahead of the host: one, or with misses read in place (no layer is
        # ever computed again) as many as the landing sets allow
        ahead = LANDING_SETS - 1 if self.arena.direct else 1
        # a queued layer needs running again when its table or residency changed before
        # it was settled, unless every write into a row it reads is queued after it on the
        # compute stream (misses read in place, no speculation on the copy stream) and its
        # routing does not read residency: then what it read was still there
        still = self.arena.direct and cfg.prefetch == "off" and not self.use_residency
        run.start(token, pos)
        stale: np.ndarray | None = None
        for l in range(L):
            if launched[l] is None or (not still and launched[l] != self.arena.version(l)):
                self._launch(run, l)
            stop = min(L, l + 1 + ahead) if run.branchless else l + 1
            for m in range(l + 1, stop):
                if launched[m] is None:
                    self._launch(run, m)  # queued before the host waits on layer l
            pack = run.read(l)
            if self._settle(run, l, pack, stale) and l + 1 < L:
                launched[l + 1] = None  # it ran on this layer's output before the fix
            stale = pack.stale_next
        return run.logits()

    def _launch(self, run: DeviceStep, l: int) -> None:
        """Runs layer l's device work on the current table and residency. A layer run
        ahead of the host is kept only if the table and residency it ran on did not change
        until the host settled it: an upload into a row it read always changes its table,
        so uploads need not wait for it (only for `fix`, which marks its reads)."""
        self.spec.arrived(l)  # uploads (and enters into the table) speculation that arrived
        self.arena.sync()
        self._launched[l] = self.arena.version(l)
        # runs queued before this one read a stale input (relaunching l+1 clears the rest)
        self._launched[l + 1:] = [None] * (len(self._launched) - l - 1)
        self.clock.open(l, "layer_ms")
        run.run(l)
        self.clock.close(l, "layer_ms")

    def _settle(self, run: DeviceStep, l: int, pack: Pack, stale: np.ndarray | None) -> bool:
        """The host's part of layer l after its device work: counts, claims, speculation,
        and, where the device did not find the experts the claims name, the misses landed
        and the layer computed again (True)."""
        routed = Routed(pack.sel, None, None, pack.stale_next, pack.scores)
        served, ranks = self._account(l, routed, stale)
        rows, timely, waited = self._serve(l, served, ranks, routed)
        if self.arena.direct:  # the body read its misses in place: its output stands
            fixed = ranks is not None  # unless drop_cold left some of them out
            self._keep(l, rows, ranks, timely, waited, pack.rows)
        else:
            fixed = bool(waited) or ranks is not None or rows != pack.rows
            if fixed:
                self._land(l, timely, waited)
        if fixed:
            run.fix(l, rows, ranks)
            self.arena.mark_used()
            self.clock.close(l, "layer_ms")
        # the probe's scores last: on a miss they run while the fix does
        ctrl = None if pack.ctrl is None else _top(pack.ctrl, self.mc.top_k)
        self._probe(l, pack.sel, served, ctrl, stale)
        self.spec.retire(l)
        self.slots.pinned.clear()
        self.spec.release_limbo(l)
        return fixed

    def batched_prefill(self) -> bool:
        return (self.cfg.prefill and not self.cfg.cpu_pool and self.routing is None
                and self.route_log is None)

    @torch.inference_mode()
    def prefill(self, tokens: list[int], pos: int) -> torch.Tensor:
        """Runs prompt tokens from position `pos`; returns the last one's logits [V]. More
        than PROMPT_BATCH of them go through every layer together (prefill.py); fewer, or
        where batching does not serve, token by token as decode does."""
        if len(tokens) <= PROMPT_BATCH or not self.batched_prefill():
            log, steps = self.counters.per_expert, []
            for i, token in enumerate(tokens):
                logits = self.step(token, pos + i)
                steps.append((log.sel.copy(), log.miss.copy()))
                log.sel[:], log.miss[:] = -1, False
            log.add_tokens(*map(np.stack, zip(*steps)))  # folded with the prompt's step
            return logits
        logits = prefill(self, tokens, pos)
        self.check_residency()
        return logits

    def check_residency(self) -> None:
        """adapt_checkres: the router's residency mask against the slot map, per layer."""
        if not self.cfg.adapt_checkres:
            return
        truth = np.zeros(self.arena.mask_host.shape, dtype=bool)
        for slot, key in enumerate(self.slots.key):
            if key is not None and self.slots.state[slot] == RESIDENT:
                truth[key] = True
        wrong = (truth != self.arena.mask_host.numpy()).sum(axis=1)
        for layer, n in enumerate(wrong.tolist()):
            self.counters.add(layer, "checkres_windows")
            self.counters.add(layer, "checkres_mismatches", n)

    def _moe(self, l: int, x: torch.Tensor, h: torch.Tensor, stale: np.ndarray | None
             ) -> tuple[torch.Tensor, np.ndarray | None]:
        """One layer's MoE block on the host-driven path: (new residual, layer l+1's router
        on this input)."""
        cfg = self.cfg
        logits = self.dec.router_logits(l, x)
        self.spec.arrived(l)  # its upload overlaps the attention the GPU is still running
        routed = self._route(l, logits, x)
        sel = routed.sel
        served, ranks = self._account(l, routed, stale, logits)
        self._probe(l, sel, served, routed.ctrl, stale)
        if sel:  # a trace may leave a layer without a routing for a token
            assert routed.selected is not None  # the host-driven path routes on the device
            w = router.weights(logits, routed.selected, self.mc.norm_topk_prob)
            if ranks is not None:  # the dropped experts' shares are left out
                w = w[ranks]
        if cfg.cpu_pool:
            assert self.sites is not None  # made when cpu_pool was first switched on
            outs = self.sites.serve(l, x, sel, cfg, self.adapt_fetch)
            y = w.to(outs.dtype) @ outs if sel else None
        else:
            rows, timely, waited = self._serve(l, served, ranks, routed)
            self._land(l, timely, waited)
            y = self.arena.mix(x, w, rows) if sel else None
        if y is not None:  # the layer routed
            h = h + self.dec.shared_output(l, x, y)
        self.spec.retire(l)
        self.slots.pinned.clear()
        self.spec.release_limbo(l)
        return h, routed.stale_next

    def _account(self, l: int, routed: Routed, stale: np.ndarray | None,
                 logits: torch.Tensor | None = None) -> tuple[list[int], list[int] | None]:
        """Counts the routing, logs it and applies drop_cold: (the experts computed, in
        rank order; the ranks they are, or None when all are). The probe (`_probe`) scores
        them apart."""
        cfg, sel = self.cfg, routed.sel
        self.counters.per_expert.sel[l, :len(sel)] = sel
        self.counters.add(l, "routings", len(sel))
        if cfg.cpu_pool:  # the adaptive tier's counts, read only by the three sites
            self.tier.observe(l, sel, cfg.adapt_decay)
        if self.route_log is not None:
            assert logits is not None  # a recording takes the host-driven path
            self.route_log.add(sel, logits, stale)
        ranks = self._drop(l, sel, routed.scores) if self.dropping and sel else None
        if ranks is not None and len(ranks) == len(sel):
            ranks = None
        served = sel if ranks is None else [sel[r] for r in ranks]
        return served, ranks

    def _serve(self, l: int, served: list[int], ranks: list[int] | None, routed: Routed
               ) -> tuple[list[int], list[Fetch], list[Fetch]]:
        """Claims the served experts (misses issue their reads) and reads ahead layer l+1's
        predicted misses: (the arena row of each, timely speculation, fetches to wait for)."""
        cfg = self.cfg
        rows, timely, waited, missed = self._claim(l, served)
        self.counters.per_expert.miss[l, [r if ranks is None else ranks[r]
                                          for r in missed]] = True
        if routed.stale_next is not None and cfg.prefetch != "off":
            guess = predict(cfg, self.mc.top_k, self.prev_sel[l + 1],
                            torch.from_numpy(routed.stale_next),
                            lambda: self.arena.mask_host[l + 1])
            if self.dropping and guess:  # prev names nothing on a sequence's first token
                guess = drop.speculable(guess, drop.share(routed.stale_next[guess]),
                                        cfg.drop_cold)
            self.spec.issue(cfg, l + 1, guess)
        return rows, timely, waited

    def _route(self, layer: int, logits: torch.Tensor, x: torch.Tensor) -> Routed:
        """Routes the layer and brings what the host needs in one device-to-host copy: the
        selected ids, and from one product of their own, this layer's router (the probe's
        control) and layer l+1's router (the stale-gate prediction) on this input."""
        cfg, mc = self.cfg, self.mc
        K, E = mc.top_k, mc.num_experts
        if self.routing is not None:
            return self._route_trace(self.routing, layer, logits)
        mask = self.arena.mask(layer) if self.use_residency else None
        selected = router.select(logits, mask, K, cfg.moce_protect, cfg.moce_bonus,
                                 cfg.moce_bonus_r1)
        has_next = layer + 1 < mc.num_layers
        routers = self.dec.routers[layer:layer + 1 + has_next]  # [1 or 2, E, D]
        probes = routers.view(-1, mc.hidden_size) @ x.float()  # [E] ctrl, [E] stale
        parts = [selected.float(), probes] + ([logits[selected]] if self.dropping else [])
        host = torch.cat(parts).cpu().numpy()  # the layer's one sync
        ctrl = _top(host[K:K + E], K)
        stale_next = host[K + E:K + 2 * E] if has_next else None
        scores = host[-K:] if self.dropping else None
        return Routed(host[:K].astype(np.int64).tolist(), selected, ctrl, stale_next, scores)

    def _route_trace(self, src: TraceRouting, layer: int, logits: torch.Tensor) -> Routed:
        """The trace's routing, with its own scores for the probe's control and the stale
        gate where it has them."""
        resident = (lambda: self.arena.mask(layer)) if self.use_residency else None
        sel, selected = src.select(layer, resident, self.cfg, self.device)
        ctrl = src.scores("logits", layer)
        stale_next = src.stale(layer + 1) if layer + 1 < self.mc.num_layers else None
        scores = logits[selected].cpu().numpy() if self.dropping and sel else None
        return Routed(sel, selected, None if ctrl is None or not sel else _top(ctrl, len(sel)),
                      stale_next, scores)

    def _drop(self, layer: int, sel: list[int], scores: np.ndarray | None) -> list[int]:
        """drop-cold-experts: the ranks of the routing that are computed (drop.py); the
        dropped ones are counted, as lookups too, so dropping never raises the hit rate."""
        assert scores is not None  # routed with the selected experts' logits when dropping
        weights = drop.share(scores)
        present = [self.slots.find((layer, e)) is not None for e in sel]
        ranks = drop.kept(weights, present, self.cfg.drop_cold)
        gone = len(sel) - len(ranks)
        if gone:
            add = self.counters.add
            add(layer, "lookups", gone)
            add(layer, "dropped", gone)
            add(layer, "dropped_mass", float(weights.sum() - weights[ranks].sum()))
            add(layer, "bytes_dropped", gone * self.ckpt.expert_bytes)
        return ranks

    def _probe(self, layer: int, sel: list[int], served: list[int], ctrl: list[int] | None,
               stale: np.ndarray | None) -> None:
        """Scores prev, stale and ctrl against the experts computed (`served`: the routing
        `sel` less what drop_cold dropped), and counts the routed experts outside the exact
        top-k; layer 0 and a sequence's first token are unscored, never wrong."""
        K, add, actual = len(sel), self.counters.add, set(served)
        if ctrl is not None and sel:
            add(layer, "rerouted", K - len(set(sel).intersection(ctrl)))
        guesses = {} if not sel else {
            "prev": self.prev_sel[layer],
            "stale": None if stale is None else _top(stale, K),
            "ctrl": ctrl,
        }
        for name, guess in guesses.items():
            if guess is None:
                continue
            named = len(actual.intersection(guess))
            add(layer, f"{name}_scored")
            add(layer, f"{name}_slots", named)
            add(layer, f"{name}_whole", float(named == K))
        self.prev_sel[layer] = served

    def _claim(self, layer: int, sel: list[int], stream: bool = True
               ) -> tuple[list[int], list[Fetch], list[Fetch], list[int]]:
        """The arena row of each of `sel`, the timely speculation it claimed (counted here),
        the fetches it must wait for (demand reads and late speculation) and the positions
        in `sel` that missed. A late speculative read keeps its speculative flag: its bytes
        count as speculative. Without `stream` misses are read into staging rows and not
        kept."""
        arena, add = self.arena, self.counters.add
        add(layer, "lookups", len(sel))
        plan = self.slots.claim_layer(layer, sel, stream)
        for key in self.slots.evicted:
            add(key[0], "evictions")
        self.slots.evicted.clear()
        bypass = iter(arena.bypass)
        rows: list[int] = []
        timely: list[Fetch] = []
        waited: list[Fetch] = []
        missed: list[int] = []
        hits = 0  # counted once: every hit of every layer of every token passes here
        for rank, (claim, e) in enumerate(zip(plan, sel)):
            row = claim.slot
            if row is None:  # a miss with no slot: a staging row (hits and spec have slots)
                row = next(bypass)
                if claim.kind == BYPASS:
                    add(layer, "bypass")
            if claim.kind == HIT:
                hits += 1
            elif claim.kind == CLAIMED_SPEC:
                fetch = self.spec.claim(layer, row)
                read = fetch.read
                if read.done.is_set() and read.complete:
                    add(layer, "pf_timely")
                    add(layer, "bytes_spec", read.bytes_read)
                    timely.append(fetch)
                else:
                    add(layer, "pf_late")
                    self.pool.promote(read)
                    waited.append(fetch)
            else:  # miss or bypass: a demand read, in rank order
                add(layer, "sync_misses")
                missed.append(rank)
                waited.append(arena.fetch((layer, e), row, speculative=False))
            rows.append(row)
        add(layer, "hits", hits)
        return rows, timely, waited, missed

    def _land(self, layer: int, timely: list[Fetch], waited: list[Fetch]) -> None:
        """Waits for the layer's reads (the stall), uploads what is not on the device yet
        and counts the waited reads' bytes."""
        add = self.counters.add
        add(layer, "stall_ms", 1000 * self.arena.land(timely + waited))
        for f in waited:
            add(layer, "bytes_spec" if f.read.speculative else "bytes_demand", f.read.bytes_read)

    def _keep(self, layer: int, rows: list[int], ranks: list[int] | None,
              timely: list[Fetch], waited: list[Fetch], found: list[int]) -> None:
        """With misses read in place: each demand miss the body read far kept from the
        bytes it landed (`rows`: the row of each expert computed; `ranks`: their ranks in
        the routing, None when all are; `found`: the row the body read at each rank, -1
        far). The rest are copied in as on any path: speculation, and a miss the body still
        found near (evicted after the body was queued: its row's new bytes are queued after
        the body, so it read the old ones, but landed none)."""
        add, rest = self.counters.add, []
        for f in waited:
            j = rows.index(f.row)
            rank = j if ranks is None else ranks[j]
            if f.read.speculative or found[rank] >= 0:
                rest.append(f)
                continue
            self.arena.adopt(f, rank)
            add(layer, "bytes_demand", f.read.bytes_read)
            add(layer, "bytes_direct", f.read.bytes_read)
        if rest:
            self.arena.mark_used()  # their copies wait for the bodies queued so far
        self._land(layer, timely, rest)

    def drain(self) -> None:
        """Settles all speculation (before a rebuild or at the end of a run)."""
        self.spec.drain()
        self.counters.end_token(0.0, tokens=0)

    def close(self) -> None:
        self.drain()
        self.arena.close()
        if self.sites:
            self.sites.close()
        if self.quality:
            self.quality.close()
