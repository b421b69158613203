"""The quality probe: what the lossy knobs (moce's resident bonus, drop_cold, a routing
trace) cost, measured live.

On a sampled token the probe runs the exact model first: exact top-k routing, every routed
expert computed, over the served KV cache. Its experts are read from the store by a reader
pool of its own into buffers of its own, so the arena, its residency and its counters are
untouched. The exact pass writes this position's keys and values, which the served step
run right after overwrites with its own, so the served state after the token is what it
would have been without the probe. Its time and bytes are counted apart (`q_ms`,
`q_bytes`), outside the token's timed span.

Then the two next-token distributions are compared: KL(exact || served) and whether their
top-1 agree. With bonus 0 and drop_cold 0 the served logits equal the exact ones bit for
bit, so the KL is exactly 0.
"""

from __future__ import annotations

import time

import torch

from tuner.config import Config
from tuner.engine.memory.experts import Experts
from tuner.engine.memory.store import ReadPool
from tuner.engine.step.reference import exact_step
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.engine.weights.model import Decoder
from tuner.vocabulary.counters import C, Counters

READERS = 2  # the probe's own readers: it reads one layer's k experts at a time


def kl(exact: torch.Tensor, served: torch.Tensor) -> float:
    """KL(exact || served) of the softmax of two logit vectors [V], in nats."""
    p, q = exact.double().log_softmax(-1), served.double().log_softmax(-1)
    return float((p.exp() * (p - q)).sum())


class QualityProbe:
    def __init__(self, ckpt: Checkpoint, dec: Decoder, counters: Counters, cfg: Config):
        self.ckpt, self.dec, self.counters = ckpt, dec, counters
        K = ckpt.config.top_k
        self.host = torch.zeros(K, ckpt.row_bytes, dtype=torch.uint8,
                                pin_memory=dec.device.type == "cuda")
        self.rows = [self.host[i].numpy().data for i in range(K)]
        # the rows on the compute device, computed the way the served path computes
        self.experts = Experts(torch.zeros_like(self.host, device=dec.device), ckpt.layout, K)
        self.ranks = torch.arange(K, device=dec.device)
        self.pool = ReadPool(READERS, 0, cfg.io_direct, cfg.io_piece_kib * 1024)
        self.ms = 0.0
        self.bytes = 0

    @torch.inference_mode()
    def exact(self, token: int, pos: int) -> torch.Tensor:
        """The exact logits [V] (float32, on the host) of `token` at `pos`; run it before
        the served step of the same position."""
        t0 = time.perf_counter()
        self.bytes = 0
        logits = exact_step(self.dec, token, pos, self._mix).cpu()
        self.ms = 1000 * (time.perf_counter() - t0)
        return logits

    def _mix(self, layer: int, x: torch.Tensor, sel: torch.Tensor, w: torch.Tensor
             ) -> torch.Tensor:
        keys = [(layer, e) for e in sel.tolist()]
        reads = self.pool.submit_all([(key, self.ckpt.extents(*key), self.rows[i])
                                      for i, key in enumerate(keys)], False)
        for read in reads:
            self.pool.wait(read)  # a failed read raises ReadError, naming the expert
            self.bytes += read.bytes_read
        k = len(keys)
        self.experts.mem[:k].copy_(self.host[:k])  # waits: the buffer is reused next layer
        return self.experts.mix(x, w, self.ranks[:k])

    def score(self, exact: torch.Tensor, served: torch.Tensor) -> None:
        """Counts one compared token on the last layer's row."""
        add, last = self.counters.add, self.counters.layers - 1
        add(last, C.q_tokens)
        add(last, C.q_agree, float(int(exact.argmax()) == int(served.argmax())))
        add(last, C.q_kl, kl(exact, served))
        add(last, C.q_ms, self.ms)
        add(last, C.q_bytes, self.bytes)

    def close(self) -> None:
        self.pool.close()
