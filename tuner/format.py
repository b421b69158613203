"""How figures are written and shaded, for the terminal UI and the page. Plain functions:
no widgets, no clocks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MISSING = "-"  # a figure the engine did not measure (nothing scored, no prefetch issued)
BINARY = ("B", "KiB", "MiB", "GiB", "TiB")


def figure(value: float | None, unit: str = "") -> str:
    """A snapshot value as text, in the unit the engine counts it in."""
    if value is None:
        return MISSING
    if unit == "bytes":
        return byte_size(value)
    if unit == "%":
        return f"{value:.1f}"
    if unit == "ms":
        return f"{value:,.2f}"
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.3g}" if abs(value) < 1 else f"{value:,.2f}"


def byte_size(n: float) -> str:
    for unit in BINARY:
        if abs(n) < 1024 or unit == BINARY[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def levels(values: Iterable[float | None], steps: int) -> list[int | None]:
    """Each value's place between the column's smallest and largest, as 0..steps-1
    (None stays None). A column where all values are equal is all level 0."""
    values = list(values)
    present = [v for v in values if v is not None]
    if not present:
        return [None] * len(values)
    lo, hi = min(present), max(present)
    span = hi - lo
    return [None if v is None else
            0 if span == 0 else min(steps - 1, int((v - lo) / span * steps))
            for v in values]


def budgets_line(out: dict[str, Any]) -> str:
    """What applying window budgets did, in one line (the page and the terminal UI)."""
    r = out["replay"]
    return (f"settings v{out['version']}: quotas {', '.join(map(str, out['quotas']))} "
            f"({out['weights']}); the window's {out['tokens']} tokens replayed hit "
            f"{r['global']['hit_rate']} % in one shared arena, {r['even']['hit_rate']} % "
            f"split evenly, {r['budgets']['hit_rate']} % with these quotas")
