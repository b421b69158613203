"""Timing of device work: host clocks on the CPU, CUDA events on a GPU.

Host clocks around asynchronous GPU work measure when the host enqueued it, not how long it
ran, so on CUDA every span is a pair of events resolved once per token, while the next
token's first layers run (Engine.count_last_token).
"""

from __future__ import annotations

import time
from collections import deque
from contextlib import contextmanager

import torch

from tuner.vocabulary.counters import Count


class HostClock:
    def __init__(self, counters):
        self.counters = counters
        self._open: dict[tuple[int, Count], list] = {}  # (layer, name) -> [start, end]

    @contextmanager
    def span(self, layer: int, name: Count, stream=None):
        t0 = time.perf_counter()
        yield
        self.counters.add(layer, name, 1000 * (time.perf_counter() - t0))

    def between(self, layer: int, name: Count, start, end) -> None:
        """A span whose ends another part marked (host times; on CUDA events recorded on
        the compute stream), counted at the flush."""
        self._open[layer, name] = [start, end]

    def _elapsed_ms(self, start, end) -> float:
        return 1000 * (end - start)

    def flush(self) -> None:
        spans, self._open = self._open, {}
        for (layer, name), (start, end) in spans.items():
            self.counters.add(layer, name, self._elapsed_ms(start, end))


class CudaClock(HostClock):
    def __init__(self, counters):
        super().__init__(counters)
        self._spans: list[tuple[int, Count, torch.cuda.Event, torch.cuda.Event]] = []
        self._later: deque[tuple] = deque()  # filled by reader threads, drained here
        # held once: asking torch for the current stream is dearer than recording an event
        self.stream = torch.cuda.current_stream()

    def later(self, layer: int, name: Count, start, end, value: float | None = None) -> None:
        """Work another thread enqueued: counted at the first flush after it finished."""
        self._later.append((layer, name, start, end, value))

    def _elapsed_ms(self, start, end) -> float:
        end.synchronize()
        return start.elapsed_time(end)

    @contextmanager
    def span(self, layer: int, name: Count, stream=None):
        stream = stream or self.stream
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        yield
        end.record(stream)
        self._spans.append((layer, name, start, end))

    def flush(self) -> None:
        super().flush()
        spans, self._spans = self._spans, []
        for layer, name, start, end in spans:
            end.synchronize()
            self.counters.add(layer, name, start.elapsed_time(end))
        waiting = []
        while self._later:
            item = self._later.popleft()
            layer, name, start, end, value = item
            if end is not None and not end.query():
                waiting.append(item)  # still uploading: counted at a later token
            elif value is not None:
                self.counters.add(layer, name, value)
            else:
                self.counters.add(layer, name, start.elapsed_time(end))
        self._later.extend(waiting)


def clock_for(device: torch.device, counters) -> HostClock:
    return CudaClock(counters) if device.type == "cuda" else HostClock(counters)
