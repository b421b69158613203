"""What the lab's profiling scripts share: a class's method wrapped so that each call adds
its seconds to `spent[name]`."""

import time


def timed(cls, name: str, spent: dict[str, float]) -> None:
    inner = getattr(cls, name)

    def call(self, *args):
        start = time.perf_counter()
        out = inner(self, *args)
        spent[name] = spent.get(name, 0.0) + time.perf_counter() - start
        return out

    setattr(cls, name, call)
