"""The device half of a decode step: each layer from its input to its output, with no host
round trip when every routed expert is already in fast memory.

A layer's body reads static buffers and writes static buffers: attention (the position is
a device tensor), the router (moce against the device residency mask), the lookup of each
selected expert's row in a device table (-1 where the expert is not there), the experts
found gathered from `mem` and computed, the residual updated, and a small pack copied to
pinned host memory: the ids, the rows found and the probe's scores. On CUDA each body is a
CUDA graph, captured once per layer and attention span and replayed with one call. A graph
cannot branch, so there a body computes its experts whatever it found (a missing one
computes row 0, and the host fixes the layer; or, where every expert also sits in
page-locked host memory, a missing one is read there in place and needs no fix: fused.Far);
on the CPU the body runs eagerly and skips the experts' compute when one of them is missing,
unless misses are read in place (from the RAM store's host copy).

The host reads a layer's pack after the layer's event. Where the device found every
expert, its output stands and the next layer may already run; otherwise the host lands
the missing bytes and `fix` computes the layer's experts again from the rows it names:
the same gather, the same batched products, the same rank-order sum, so the output is what
computing them all together gives (bit for bit).

Where the three sites compute the experts (`cpu_pool`, Route.sites) a body stops after
routing: its pack carries the MoE input too, the host has the sites compute the layer's
experts (tiers.py), and `finish` writes the layer's output from their sum.

Shapes: D hidden, E experts, K top-k, L layers, P pack width (4K + 2E, and D more with the
sites).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from tuner.engine.memory.experts import SPEC_SETS, Experts
from tuner.engine.memory.tiers import Outputs
from tuner.engine.weights import fused, router, router_kernels
from tuner.engine.weights.model import Decoder


@dataclass(frozen=True)
class Ahead:
    """How a body reads the next layer's predicted misses ahead into its speculation rows
    (misses read in place): the predictor and its pick, baked into the graphs."""

    predictor: str  # "stale": the next layer's router on this input; "prev": what the next
    # layer routed for the previous token
    limit: int  # predicted misses read ahead, in rank order (1..k)
    pick: tuple[int, float, float] | None = None  # stale: the moce pick it predicts
    # (protect, bonus, bonus_r1) against the next layer's residency, or the raw top-k
    drop_cold: float = 0.0  # a predicted weight below it is not read ahead (drop-aware)


@dataclass(frozen=True)
class Route:
    """How the bodies route: what a captured graph bakes in (a change recaptures)."""

    residency: bool = False  # moce: the router reads the residency mask
    protect: int = 0
    bonus: float = 0.0
    bonus_r1: float = 0.0
    probes: bool = False  # pack the probe's scores (this layer's and the next router's)
    scores: bool = False  # pack the selected experts' logits (drop_cold)
    ahead: Ahead | None = None  # read the next layer's predicted misses ahead
    sites: bool = False  # the three sites compute the experts: the body stops after routing
    # and packs the MoE input (float32), `finish` ends the layer


def choose(scores: torch.Tensor, pred: torch.Tensor | None, ok: torch.Tensor | None,
           table: torch.Tensor, k: int, limit: int, drop_cold: float) -> torch.Tensor:
    """What a layer reads ahead for the next one: its predicted experts (`pred` int64 [k],
    or the top k of `scores` [E], its router on this layer's input), less those resident
    (`table` [E] >= 0), all of them unless `ok` (bool [1]), and with drop_cold those whose
    predicted weight (the softmax over their scores) is below it, the top one kept; the
    first `limit` of the rest in rank order, -1 after them: ids [k]. fused.choose_ahead is
    the same rule in one kernel."""
    if pred is None:
        pred = torch.topk(scores, k).indices
    wanted = table.index_select(0, pred) < 0
    if ok is not None:
        wanted &= ok
    if drop_cold > 0:  # a miss of that predicted weight would be dropped unread
        share = torch.softmax(scores.index_select(0, pred).double(), 0)
        wanted &= (share >= drop_cold) | (torch.arange(k, device=pred.device)
                                          == share.argmax())
    rank = torch.arange(k, device=pred.device)
    first = torch.argsort(torch.where(wanted, rank, rank + k))  # wanted first, rank order
    return torch.where((rank < limit) & wanted.index_select(0, first),
                       pred.index_select(0, first), -1)


def ahead_rows(rows: torch.Tensor, far_rows: torch.Tensor, src: torch.Tensor,
               spec_first: int) -> torch.Tensor:
    """Where a layer finds its misses read ahead: `rows` [k] (arena rows, -1 missing) with
    each missing expert whose far row (`far_rows` [k]: layer * E + expert) the set `src`
    [k] names at place j given speculation row spec_first + j. The set names far rows, so
    where a later layer chose into it since (this layer runs again after the next one
    ran), nothing matches and the layer reads its misses in place. router_kernels.route is
    the same rule in one kernel."""
    match = far_rows[:, None] == src[None, :]  # [k, k]
    there = spec_first + match.float().argmax(1)
    return torch.where((rows < 0) & match.any(1), there, rows)


@dataclass(frozen=True)
class Views:
    """Layer l's slices of the step's buffers, made once: on the CPU a body runs eagerly
    every token, and indexing a tensor is an operation of its own there."""

    h: torch.Tensor  # the residual into the layer
    hatt: torch.Tensor  # after attention
    x: torch.Tensor  # the MoE block's input
    w: torch.Tensor  # routing weights [K]
    table: torch.Tensor  # the layer's rows of the lookup table [E]
    out: torch.Tensor  # the residual out of the layer (the next one's h)
    pack: torch.Tensor  # [P]
    routing: torch.Tensor  # the pack's ids and rows [2K]
    probes: torch.Tensor  # the pack's probe scores: this router's and the next one's
    routers: torch.Tensor  # this router and the next one, side by side [E or 2E, D]
    scores: torch.Tensor  # the pack's selected logits [K]
    named: torch.Tensor  # the pack's read-ahead set [K]
    xs: torch.Tensor  # the pack's MoE input, for the sites [D]
    found: np.ndarray  # the rows the body found, in host memory on the CPU [K]


class Pack:
    """A layer's pack as the host reads it."""

    def __init__(self, row: np.ndarray, K: int, E: int, layer: int, last: bool, route: Route):
        ids = row[:2 * K].astype(np.int64).tolist()
        self.sel = ids[:K]  # expert ids, rank order
        self.rows = ids[K:]  # arena rows; -1 not found
        self.ctrl = row[2 * K:2 * K + E] if route.probes else None  # this router on x [E]
        self.stale_next = None if last or not route.probes else \
            row[2 * K + E:2 * K + 2 * E].copy()  # layer l+1's router on x [E]
        self.scores = row[2 * K + 2 * E:3 * K + 2 * E].copy() if route.scores else None
        # the experts read ahead for this layer by the one before it: the set's far rows
        # (layer * E + expert; -1 none), of which those of this layer count
        base = layer * E
        self.ahead = [r - base for r in row[3 * K + 2 * E:4 * K + 2 * E].astype(np.int64)
                      .tolist() if base <= r < base + E] if route.ahead else []
        # the MoE input, read in place (the pack's next write is this layer's next run)
        self.x = row[4 * K + 2 * E:] if route.sites else None

    @property
    def found(self) -> bool:
        return all(r >= 0 for r in self.rows)


class DeviceStep:
    """Per-layer bodies over one decoder, one expert memory and its lookup table.

    `table` [L, E] int64 gives each expert's row in `experts.mem` or -1; `mask` [L, E] bool
    is the residency the moce router reads. Both are read by the device when a body runs,
    so the caller keeps them current before each `run`."""

    def __init__(self, dec: Decoder, experts: Experts, table: torch.Tensor,
                 mask: torch.Tensor | None, route: Route):
        mc, dev = dec.cfg, dec.device
        L, E, K, D = mc.num_layers, mc.num_experts, mc.top_k, mc.hidden_size
        self.dec, self.experts, self.table, self.mask = dec, experts, table, mask
        self.L, self.E, self.K = L, E, K
        self.route = route
        self.cuda = dev.type == "cuda"  # graphs, pinned buffers, events
        self.branchless = dec.fixed  # the body's shapes are fixed: it computes unconditionally
        self.tokpos = torch.zeros(2, dtype=torch.int64, device=dev)  # token id, position
        self.h = torch.zeros(L + 1, D, dtype=dec.dtype, device=dev)  # residual into layer l
        self.hatt = torch.zeros(L, D, dtype=dec.dtype, device=dev)  # after attention
        self.x = torch.zeros(L, D, dtype=dec.dtype, device=dev)  # the MoE block's input
        self.w = torch.zeros(L, K, dtype=torch.float32, device=dev)  # routing weights
        width = 4 * K + 2 * E + D
        self.pack = torch.zeros(L, width, dtype=torch.float32, device=dev)
        self.pack[:, 3 * K + 2 * E:4 * K + 2 * E] = -1  # no set read ahead (layer 0's, always)
        # the CPU site's outputs of each layer, up from the host (finish_cpu)
        self.cpu_out = torch.zeros(L, K, D, dtype=torch.float32, device=dev)
        # on CUDA the body copies its pack here, in pinned memory; on the CPU it is the pack
        self.pack_host = torch.zeros(L, width, dtype=torch.float32, pin_memory=True) \
            if self.cuda else self.pack
        self._pack_np = self.pack_host.numpy()
        self.views = [self._views(l) for l in range(L)]
        self.out = torch.zeros(mc.vocab_size, dtype=torch.float32, device=dev)
        self.pos = 0
        # each layer's event, timed: one event a layer both wakes the host and times the
        # layer (from the event before its run), where a pair of its own added two records;
        # with the token's first, in two sets that tokens take in turn: a token's times are
        # read while the next one runs (Engine.count_last_token)
        sets = [[torch.cuda.Event(enable_timing=True) for _ in range(L + 1)]
                for _ in range(2 if self.cuda else 0)]
        self._sets: list[tuple[list[torch.cuda.Event], torch.cuda.Event | None]] = \
            [(events[:L], events[L]) for events in sets] or [([], None)]
        self.done, self._begin = self._sets[0]
        self._last = self._begin  # the latest event on the stream before the next run
        self._tokens = 0
        # each layer's span this token, [start, end]: host times on the CPU, events on CUDA
        self.spans: list[list] = [[0.0, 0.0] for _ in range(L)]
        # held once: asking torch for the current stream costs more than recording an event
        self.stream = torch.cuda.current_stream(dev) if self.cuda else None
        self.graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}  # (layer, span)
        self._head: torch.cuda.CUDAGraph | None = None
        self._pool = torch.cuda.graph_pool_handle() if self.cuda else None
        # a fix's rows and, reading misses from the staging ring, their entries (-1: near)
        self._rows = torch.full((2, K), -1, dtype=torch.int64, pin_memory=self.cuda)
        self.fix_rows = torch.zeros(L, 2, K, dtype=torch.int64, device=dev)
        # read ahead (Ahead): a choice's expert ids (scratch, on their way to far rows), each
        # set's far rows (-1: none), which its copy reads and its reading body matches, and
        # whether a layer routed since the sequence started (prev)
        self.ahead_ids = torch.full((K,), -1, dtype=torch.int64, device=dev)
        self.ahead_src = torch.full((SPEC_SETS, K), -1, dtype=torch.int64, device=dev)
        self.routed = torch.zeros(L, dtype=torch.bool, device=dev)
        # the stream a body copies its read-ahead set on (_copy_set)
        self.ahead_stream = torch.cuda.Stream(dev) if self.cuda else None
        self._fixes: dict[int, torch.cuda.CUDAGraph] = {}  # by layer
        self._finishes: dict[int, torch.cuda.CUDAGraph] = {}  # by layer (finish_cpu)
        self.captured = 0  # graphs captured so far

    def _views(self, l: int) -> Views:
        K, E, pack = self.K, self.E, self.pack[l]
        routers = self.dec.routers[l:l + 2]  # the last layer's alone
        return Views(self.h[l], self.hatt[l], self.x[l], self.w[l], self.table[l],
                     self.h[l + 1], pack, pack[:2 * K], pack[2 * K:2 * K + E * len(routers)],
                     routers.view(-1, routers.shape[-1]), pack[2 * K + 2 * E:3 * K + 2 * E],
                     pack[3 * K + 2 * E:4 * K + 2 * E], pack[4 * K + 2 * E:],
                     self._pack_np[l, K:2 * K])

    def set_route(self, route: Route) -> None:
        if route != self.route:
            self.route = route
            self.graphs.clear()  # captured with the old routing

    def warm(self, fixes: bool = True) -> list[float]:
        """On CUDA, captures every graph a token can replay that is not captured yet: each
        layer's body for every attention span of the context, its fix (`fixes`) or, with
        the sites, its ending from the CPU site's outputs (finish_cpu), the logits. Their
        eager runs build the kernels, so no token pays for either. The runs write scratch
        only: the position is the context's last, whose keys and values a token writes
        before any token reads them. Returns the seconds each layer took (the
        logits' on the last); on the CPU, nothing to do."""
        took = [0.0] * self.L
        if not self.cuda:
            return took
        tokpos = self.tokpos.clone()
        self.tokpos[1].fill_(self.dec.context - 1)
        for layer in range(self.L):
            t0, before = time.perf_counter(), self.captured
            for span in self.dec.spans():
                self._body_graph(layer, span)
            if self.route.sites:
                self._finish_graph(layer)
            elif fixes:
                self._fix_graph(layer)
            if layer + 1 == self.L and self._head is None:
                self._head = self._capture(self._logits)
            if self.captured != before:
                torch.cuda.synchronize()
                took[layer] = time.perf_counter() - t0
        self.tokpos.copy_(tokpos)
        return took

    # -- one token ---------------------------------------------------------------------
    @torch.inference_mode()
    def new_sequence(self) -> None:
        """No layer has routed in this sequence yet: `prev` reads nothing ahead."""
        self.routed.zero_()

    def start(self, token: int, pos: int) -> None:
        """The token and its position, to the device: written by two fills queued on the
        stream, so a caller that queues tokens back to back needs no host buffer."""
        self.pos = pos
        self.tokpos[0].fill_(token)
        self.tokpos[1].fill_(pos)
        self._tokens += 1
        self.done, self._begin = self._sets[self._tokens % len(self._sets)]
        if self._begin is not None:
            self._begin.record(self.stream)
            self._last = self._begin

    def run(self, layer: int) -> None:
        """Layer `layer`'s body, on the current stream; on CUDA its event follows it. Its
        span (`spans`) starts where the work before it ended."""
        span = self.dec.span(self.pos)
        if not self.cuda:
            start = time.perf_counter()
            self._body(layer, span)
            self.spans[layer] = [start, time.perf_counter()]
            return
        self._body_graph(layer, span).replay()
        done = self.done[layer]
        done.record(self.stream)
        self.spans[layer] = [self._last, done]
        self._last = done

    def read(self, layer: int) -> Pack:
        """Waits for the layer's body; its pack."""
        if self.cuda:
            self.done[layer].synchronize()
        return Pack(self._pack_np[layer], self.K, self.E, layer, layer + 1 == self.L,
                    self.route)

    def fix(self, layer: int, rows: list[int], ranks: list[int] | None = None,
            staged: list[int] | None = None) -> None:
        """Computes the layer's experts again from arena rows `rows` (the host's, in rank
        order; `ranks`: the routing's ranks they serve, when drop_cold left some out) and
        writes the layer's output. `staged` (the experts' staging entries, Experts.staging):
        where a row is -1, its expert is read in place from that entry and lands (place j
        of `rows` in the layer's landing set). On CUDA a whole routing's fix is a graph of
        its own. The layer's span then ends after the fix."""
        n, reads_staging = len(rows), self.experts.staging is not None
        idx = self._rows  # its last copy ran before the layer's event the host awaited
        idx.numpy()[0, :n] = rows
        if reads_staging:
            idx.numpy()[1, :n] = -1 if staged is None else staged
        if ranks is not None or not self.cuda:
            w = self.views[layer].w if ranks is None else self.views[layer].w[ranks]
            dev = self.fix_rows.device
            self._fix(layer, idx[0, :n].to(dev, non_blocking=True), w,
                      idx[1, :n].to(dev, non_blocking=True) if reads_staging else None)
        else:
            self.fix_rows[layer].copy_(idx, non_blocking=True)
            self._fix_graph(layer).replay()
        self._ended(layer)

    def finish(self, layer: int, y: torch.Tensor) -> None:
        """Layer `layer`'s output from its routed experts' weighted sum `y` [D], which the
        sites computed after its body (Route.sites); its span ends after it."""
        self._residual(layer, y)
        self._ended(layer)

    def finish_cpu(self, layer: int, outs: torch.Tensor) -> None:
        """`finish` where the CPU site computed every routed expert: `outs` [K, D], their
        outputs in rank order in host memory (page-locked beside a GPU). On CUDA one copy
        up and one graph replay, where summing them eagerly (Outputs.sum) took four
        launches more, about 0.05 ms a layer on the H200 host, while the host waits."""
        self.cpu_out[layer].copy_(outs, non_blocking=self.cuda)
        if self.cuda:
            self._finish_graph(layer).replay()
        else:
            self._finish_cpu(layer)
        self._ended(layer)

    def _finish_cpu(self, layer: int) -> None:
        """`finish` on the CPU site's outputs, summed as Outputs.sum sums them."""
        v = self.views[layer]
        self._residual(layer, Outputs([], [], self.cpu_out[layer], list(range(self.K)))
                            .sum(v.w, v.x))

    def _residual(self, layer: int, y: torch.Tensor) -> None:
        """Layer `layer`'s output from its routed experts' sum y [D] (and a shared
        expert's, where the model has one)."""
        v = self.views[layer]
        torch.add(v.hatt, self.dec.shared_output(layer, v.x, y), out=v.out)

    def _ended(self, layer: int) -> None:
        """The layer's span ends after the work just queued."""
        if not self.cuda:
            self.spans[layer][1] = time.perf_counter()
            return
        self.done[layer].record(self.stream)  # its span's end, and the next run's start
        self._last = self.done[layer]

    def _fix(self, layer: int, rows: torch.Tensor, w: torch.Tensor,
             staged: torch.Tensor | None) -> None:
        y = self.experts.mix(self.views[layer].x, w, rows, staged, layer, self.experts.staging)
        self._residual(layer, y)

    def logits(self) -> torch.Tensor:
        """The token's logits [V] (float32), after the last layer."""
        if not self.cuda:
            self._logits()
        else:
            if self._head is None:
                self._head = self._capture(self._logits)
            self._head.replay()
        return self.out.clone()

    def whole_token(self) -> torch.cuda.CUDAGraph:
        """Every layer and the logits captured as one CUDA graph at the current position:
        what the same kernels cost with no launch between layers (the bench's floor)."""
        span = self.dec.span(self.pos)

        def token() -> None:
            for layer in range(self.L):
                self._body(layer, span)
            self._logits()

        return self._capture(token)

    # -- the bodies ----------------------------------------------------------------------
    def _body(self, l: int, span: int) -> None:
        """One layer; `span`: the attention span where shapes are fixed (the position is on
        the device then)."""
        dec, route, K = self.dec, self.route, self.K
        a = route.ahead if self.experts.speculates else None
        ahead = a is not None
        side = self._copy_set(l) if ahead and l > 0 else None
        v, E = self.views[l], self.E
        h = dec.embed.index_select(0, self.tokpos[:1])[0] if l == 0 else v.h
        if self.branchless:
            h = dec.attend_one(l, h, self.tokpos[1:], span, out=v.hatt)
        else:
            h = dec.attention(l, h, self.pos)
            v.hatt.copy_(h)
        x = dec.moe_input(l, h)
        kernels = router_kernels.usable(x)
        probes = None
        if route.probes:  # this layer's router and layer l+1's on x in one product, written
            # in place: a copy more would be one more operation of the layer's graph
            probes = router_kernels.logits(v.routers, x, out=v.probes) if kernels else \
                torch.mv(v.routers, x if x.dtype == torch.float32 else x.float(), out=v.probes)
        # the kernel's rows do not depend on the rows beside them: its first E are the logits
        logits = probes[:E] if probes is not None and kernels else dec.router_logits(l, x)
        mask = None
        if route.residency:
            assert self.mask is not None  # a route that reads residency is given the mask
            mask = self.mask[l]
        w, norm = v.w, dec.cfg.norm_topk_prob
        # a miss the layer before read ahead is found in its speculation row (ahead_rows;
        # the bytes read ahead for a layer's first run go uncounted where it runs again:
        # the host reads the pack of its last); the pack names the set (layer 0's: none,
        # as allocated)
        spec = (self.ahead_src[l % SPEC_SETS], self.experts.spec_first(l), l * self.E,
                v.named) if ahead and l > 0 else None
        if kernels and router.plain(mask, route.bonus, route.bonus_r1):
            # the top k, their rows (-1 where not in mem, or their speculation rows), their
            # weights and the pack's ids, rows and set: one kernel
            sel, rows = router_kernels.route(logits, v.table, K, norm, w, v.routing, spec)
        else:
            sel = router.select(logits, mask, K, route.protect, route.bonus, route.bonus_r1)
            rows = v.table.index_select(0, sel)  # [K], -1 where not in mem
            w.copy_(router.weights(logits, sel, norm))
            if spec is not None:
                src, first, base, named = spec
                rows = ahead_rows(rows, sel + base, src, first)
                named.copy_(src)
            v.routing.copy_(torch.cat([sel, rows]))
        far_rows = sel + l * self.E if self.experts.far is not None else None
        v.x.copy_(x)
        if route.scores:
            v.scores.copy_(logits.index_select(0, sel))
        if a is not None and a.predictor == "prev":  # what `ok` reads (_choose_ahead)
            self.routed[l:l + 1].fill_(True)
        if route.sites:
            v.xs.copy_(x)
        if self.cuda:  # the MoE input crosses only when the sites ask for it
            n = None if route.sites else 4 * K + 2 * E
            self.pack_host[l, :n].copy_(v.pack[:n], non_blocking=True)
        if route.sites:  # the sites compute the experts; `finish` ends the layer
            return
        if ahead and l + 1 < self.L:
            assert probes is not None  # the engine packs probes whenever it reads ahead
            self._choose_ahead(l + 1, probes[E:])
        if side is not None:  # the experts read the copy's rows
            torch.cuda.current_stream().wait_stream(side)
        if far_rows is not None:  # a missing expert is read where it is
            y = self.experts.mix(x, w, rows, far_rows, l)
        elif self.branchless:  # a missing expert computes row 0; the host fixes the layer
            y = self.experts.mix(x, w, rows.clamp(min=0))
        elif not self.computes(l):  # on the CPU a missing expert is left to the host's fix
            return
        else:
            y = self.experts.mix(x, w, rows)
        torch.add(h, dec.shared_output(l, x, y), out=v.out)

    def computes(self, layer: int) -> bool:
        """Whether the layer's body computes (computed, once it ran) its experts from the
        rows it found: always where shapes are fixed (a missing expert computes row 0, for
        the host's fix) or a missing one is read in place; on the CPU otherwise only where
        it found every one."""
        if self.branchless or self.experts.far is not None:
            return True
        # on the CPU the pack is host memory; a comparison in numpy right after the body's
        # torch operations cost an every-hit token 2-4 % more than this (machinery bench)
        return min(self.views[layer].found.tolist()) >= 0

    def _choose_ahead(self, nxt: int, scores: torch.Tensor) -> None:
        """Chooses layer `nxt`'s predicted misses, in rank order, at most `limit`, into its
        set (`scores` [E]: its router on this layer's input): the plain stale gate in one
        kernel (a moce pick routes first). On the CPU they are read now; on CUDA layer
        `nxt`'s body copies them at its start."""
        a, K, E = self.route.ahead, self.K, self.E
        assert a is not None  # the body reads ahead only with Ahead
        pred, ok = None, None
        if a.predictor == "prev":  # what layer nxt routed for the previous token
            pred, ok = self.pack[nxt, :K].long(), self.routed[nxt:nxt + 1]
        elif a.pick is not None:  # the set the moce router will pick
            assert self.mask is not None  # a moce pick is asked of the engine's bodies
            pred = router.select(scores, self.mask[nxt], K, *a.pick)
        ids, src = self.ahead_ids, self.ahead_src[nxt % SPEC_SETS]
        if self.experts.fused:
            fused.choose_ahead(scores, pred, ok, self.table[nxt], ids, src, a.limit,
                               a.drop_cold, nxt * E)
        else:
            ids.copy_(choose(scores, pred, ok, self.table[nxt], K, a.limit, a.drop_cold))
            src.copy_(torch.where(ids >= 0, ids + nxt * E, -1))
        if not self.cuda:  # on CUDA the body that reads the set copies it
            self.experts.speculate(nxt, src)

    def _copy_set(self, l: int) -> torch.cuda.Stream | None:
        """On CUDA, forks the copy of layer l's read-ahead set (chosen by the body before,
        which ran before this one on the stream) onto the read-ahead stream, where it runs
        beside this body's attention and routing, while the link carries nothing else;
        the body's experts join it (the stream returned). On the CPU the set was read when
        it was chosen."""
        side = self.ahead_stream
        if side is None:
            return None
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.experts.speculate(l, self.ahead_src[l % SPEC_SETS])
        return side

    def _logits(self) -> None:
        self.out.copy_(self.dec.logits(self.h[self.L]))

    def _body_graph(self, layer: int, span: int) -> torch.cuda.CUDAGraph:
        return self._graph(self.graphs, (layer, span), lambda: self._body(layer, span))

    def _fix_graph(self, layer: int) -> torch.cuda.CUDAGraph:
        return self._graph(self._fixes, layer, lambda: self._fix(
            layer, self.fix_rows[layer, 0], self.w[layer],
            None if self.experts.staging is None else self.fix_rows[layer, 1]))

    def _finish_graph(self, layer: int) -> torch.cuda.CUDAGraph:
        return self._graph(self._finishes, layer, lambda: self._finish_cpu(layer))

    def _graph(self, graphs: dict, key, fn) -> torch.cuda.CUDAGraph:
        """`graphs[key]`, `fn` captured the first time it is asked for."""
        graph = graphs.get(key)
        if graph is None:
            graph = graphs[key] = self._capture(fn)
        return graph

    def _capture(self, fn) -> torch.cuda.CUDAGraph:
        """`fn` captured as a CUDA graph, after two eager runs on a side stream (they load
        kernels and make library handles; their writes are the same the replay makes)."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        self.captured += 1
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            fn()
        return graph
