"""Arena sizes as an operator writes them: a slot count, a share of the layer-expert pairs,
or working sets.

One token's working set is its L x k routings. An arena smaller than that cannot hold one
token's experts: LRU and 2Q then evict every expert before the next token asks for it
again and hit next to nothing, while pinning and Belady's bound still hit, so a comparison
of policies there says little about larger arenas. Sizes are therefore shown in working
sets beside slots and shares, and a size below one working set comes with a warning.
"""

from __future__ import annotations

import re

from tuner.vocabulary.trace_format import Trace, TraceError

FORMS = ("a slot count (205), a share of the layer-expert pairs (25%) or working sets, "
         "multiples of one token's layers x top-k routings (1.5ws)")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%|ws)?\s*$")


def working_set(trace: Trace) -> int:
    """One token's routings: layers x top-k."""
    return trace.layers * trace.top_k


def pairs(trace: Trace) -> int:
    return trace.layers * trace.num_experts


def parse_size(text: str, trace: Trace, what: str = "arena size") -> int:
    """Slots of `text`: `N` slots, `P%` of the pairs or `Mws` working sets (rounded, at
    least 1). Raises TraceError naming the forms allowed."""
    m = _SIZE.match(str(text))
    if not m:
        raise TraceError(f"{what} {text!r}: allowed {FORMS}")
    value, unit = float(m.group(1)), m.group(2)
    if unit is None and not m.group(1).isdigit():
        raise TraceError(f"{what} {text!r}: a slot count is a whole number; allowed {FORMS}")
    slots = round(value * {None: 1, "%": pairs(trace) / 100, "ws": working_set(trace)}[unit])
    if slots < 1:
        raise TraceError(f"{what} {text!r} is {slots} slots; the arena needs at least 1")
    return slots


def parse_sizes(text: str, trace: Trace, what: str = "arena sizes") -> list[int]:
    """A comma-separated list of sizes (see parse_size)."""
    items = [t for t in str(text).split(",") if t.strip()]
    if not items:
        raise TraceError(f"{what} {text!r}: give one or more, comma-separated: {FORMS}")
    return [parse_size(t, trace, what) for t in items]


def in_working_sets(slots: int, trace: Trace) -> float:
    return round(slots / working_set(trace), 2)


def below_working_set(slots: int, trace: Trace) -> str | None:
    """The warning for an arena smaller than one token's routings, or None."""
    ws = working_set(trace)
    if slots >= ws:
        return None
    return (f"{slots} slots are below one token's working set ({ws} = {trace.layers} layers "
            f"x top-{trace.top_k}): LRU and 2Q evict each expert before the next token asks "
            "for it again, so they hit next to nothing there whatever the routing")
