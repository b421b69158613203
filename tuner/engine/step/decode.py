"""The streaming engine: one token through every layer, experts served by the arena.

`Engine` holds the parts (the decoder, the arena and its slot map, the speculator, the
probe, the three sites, the quality probe) and picks the path a token takes: device first
(device_first.py), where each layer's device work runs before the host's and the hit path
never waits on the host; the three sites' (sites_step.py), where the same bodies attend
and route and the sites compute the experts; or host-driven (host_driven.py) for a routing
trace and a route recording, where the host routes each layer before its experts run.
Each does a layer's host work through layer_work.py; prompts of more than a few tokens go
through every layer together (prefill.py). Live settings are applied between tokens
(live.py). The quality probe (quality.py) runs the exact model on sampled tokens before
`step`, outside the token's timing (`exact_first`).
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from tuner.config import Config
from tuner.engine.memory.arena import Arena
from tuner.engine.memory.tiers import Sites, Tier
from tuner.engine.memory.verify import Verifier
from tuner.engine.step.clock import clock_for
from tuner.engine.step.device_first import DeviceFirst
from tuner.engine.step.device_step import DeviceStep
from tuner.engine.step.host_driven import HostDriven
from tuner.engine.step.layer_work import LayerWork
from tuner.engine.step.live import LiveSettings
from tuner.engine.step.prefill import PROMPT_BATCH, prefill
from tuner.engine.step.probe import Probe
from tuner.engine.step.quality import QualityProbe
from tuner.engine.step.route_log import RouteLog
from tuner.engine.step.routing_source import open_routing
from tuner.engine.step.sites_step import SitesStep
from tuner.engine.step.speculate import Speculator
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.engine.weights.model import Decoder, compute_dtype
from tuner.interplay import Facts, adapt_fetch_on, drop_cold_on, moce_on, warnings
from tuner.vocabulary.counters import C, Counters
from tuner.vocabulary.slots import RESIDENT, arena_slots, quotas_for


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
        self.probe = Probe(L, self.counters)  # prev, the stale gate and the control
        self.route_log: RouteLog | None = None  # set one to record routings
        self.routing = open_routing(cfg.routing, L, E, K)  # None: the model's routers route
        self.tier = Tier(L, E, self.slots)
        self.sites: Sites | None = None  # made when cpu_pool is first switched on
        self.quality: QualityProbe | None = None  # made when quality_every is first set
        self.work = LayerWork(self)
        self.device_first, self.host_driven = DeviceFirst(self), HostDriven(self)
        self.sites_step = SitesStep(self)
        self.steps = 0
        # a token's probe scores and layer times, counted under the next token's first
        # layers (`count_last_token`): the steps ended when it ran, or None when counted
        self._uncounted: int | None = None
        LiveSettings(self).apply(cfg)

    # -- settings ----------------------------------------------------------------------
    def apply_live(self, cfg: Config) -> None:
        """Takes the live knobs of `cfg` (called between tokens only); raises ValueError,
        having changed nothing, when they do not fit this model and arena."""
        LiveSettings(self).apply(cfg)

    # what the live settings make of the knobs (tuner/interplay.py declares each)
    @property
    def use_residency(self) -> bool:
        return moce_on(self.cfg)

    @property
    def dropping(self) -> bool:
        return drop_cold_on(self.cfg)

    @property
    def adapt_fetch(self) -> bool:
        return adapt_fetch_on(self.cfg)

    @property
    def device_step(self) -> DeviceStep | None:
        """The device-first path's layer bodies, once made."""
        return self.device_first.run

    def host_driven_now(self) -> bool:
        """The host has each layer's routing before its experts run: the three sites, a
        routing trace, a recording."""
        return bool(self.cfg.cpu_pool) or self.routing is not None or self.route_log is not None

    def sites_now(self) -> bool:
        """The three sites serve the model's own routing (sites_step.py)."""
        return bool(self.cfg.cpu_pool) and self.routing is None and self.route_log is None

    def warm_up(self) -> None:
        """On CUDA, the layer bodies' graphs and kernels made before a token needs them,
        counted apart (DeviceFirst.warm_up). Runs when the engine is built and after a
        change that drops graphs."""
        if self.cuda and (self.sites_now() or not self.host_driven_now()):
            self.device_first.warm_up()

    def notes(self) -> list[str]:
        """What is off or capped at the current settings, and how to read a figure: the
        knobs' interplay (tuner/interplay.py) on this engine, and the routing trace's."""
        facts = Facts(self.slots.n, self.mc.top_k, self.cuda, self.arena.direct,
                      self.host_driven_now(), self.batched_prefill(), self.routing is not None)
        trace = self.routing.notes(self.cfg) if self.routing is not None else []
        return warnings(self.cfg, facts) + trace

    def reset_counters(self) -> None:
        self.count_last_token()
        self.counters.clear()

    def resident_counts(self) -> list[int]:
        return [self.slots.resident_per_layer[l] for l in range(self.mc.num_layers)]

    def resident_map(self) -> np.ndarray:
        """[L, E] bool: which experts are resident now (the router's own residency mask)."""
        return self.arena.mask_host.numpy().copy()

    # -- one token ---------------------------------------------------------------------
    def reset_sequence(self) -> None:
        """A new conversation: the prev-token predictor has nothing to go on."""
        self.probe.new_sequence()
        if self.device_step is not None:
            self.device_step.new_sequence()
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
        cfg, host_driven = self.cfg, self.host_driven_now()
        if host_driven:  # the device-first path counts it once this token's first layers run
            self.count_last_token()
        if cfg.cpu_pool and cfg.adapt_every and self.steps and self.steps % cfg.adapt_every == 0:
            assert self.sites is not None  # made when cpu_pool was first switched on
            self.sites.tier_round(cfg, self.adapt_fetch)
        self.steps += 1
        path = self.sites_step if self.sites_now() else \
            self.host_driven if host_driven else self.device_first
        logits = path.step(token, pos)
        self._uncounted = self.counters.ended
        if self.routing is not None:
            self.routing.advance()
        self.check_residency()
        return logits

    def count_last_token(self) -> None:
        """Scores the last token's probe and counts its layers' times, into its own step
        (Counters.late). On CUDA the device-first path calls it once the next token's first
        layers are queued, so the host's work between tokens runs under the device's; every
        other path, and anything that reads the counts whole, calls it first."""
        if self._uncounted is None:
            return
        with self.counters.late(self._uncounted):
            self.probe.score()
            self.clock.flush()  # the layers' events: long done
        self._uncounted = None

    def batched_prefill(self) -> bool:
        return (self.cfg.prefill and not self.cfg.cpu_pool and self.routing is None
                and self.route_log is None)

    @torch.inference_mode()
    def prefill(self, tokens: list[int], pos: int) -> torch.Tensor:
        """Runs prompt tokens from position `pos`; returns the last one's logits [V]. More
        than PROMPT_BATCH of them go through every layer together (prefill.py); fewer, or
        where batching does not serve, token by token as decode does."""
        self.count_last_token()
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
            self.counters.add(layer, C.checkres_windows)
            self.counters.add(layer, C.checkres_mismatches, n)

    def drain(self) -> None:
        """Settles all speculation and counts (before a rebuild or at the end of a run)."""
        self.count_last_token()
        self.spec.drain()
        self.counters.end_token(0.0, tokens=0)

    def close(self) -> None:
        self.drain()
        self.arena.close()
        if self.sites:
            self.sites.close()
        if self.quality:
            self.quality.close()
