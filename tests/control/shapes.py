"""Whether an answer has the shape its type declares: a TypedDict's keys exactly (its
required ones, and none it does not name), in every TypedDict, list and mapping within.
What a cast at the control plane's boundary (tuner.control.controller) takes on trust,
checked on real answers."""

from __future__ import annotations

import types
import typing
from typing import Any, get_args, get_origin, get_type_hints

from typing_extensions import is_typeddict


def problems(value: Any, declared: Any, where: str = "answer") -> list[str]:
    """Where `value` leaves the shape `declared` says; empty when it keeps to it."""
    origin, args = get_origin(declared), get_args(declared)
    if origin is typing.Annotated:
        return problems(value, args[0], where)
    if origin in (typing.Union, types.UnionType):  # the first member the value fits
        found = [problems(value, a, where) for a in args]
        return [] if any(not p for p in found) else found[0]
    if declared is type(None):
        return [] if value is None else [f"{where}: {value!r} is not None"]
    if is_typeddict(declared):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a {declared.__name__}"]
        hints = get_type_hints(declared, include_extras=True)
        missing = declared.__required_keys__ - value.keys()
        extra = value.keys() - hints.keys()
        out = [f"{where}: {declared.__name__} lacks {sorted(missing)}"] if missing else []
        out += [f"{where}: {declared.__name__} has undeclared {sorted(extra)}"] if extra else []
        for key in value.keys() & hints.keys():
            out += problems(value[key], hints[key], f"{where}.{key}")
        return out
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [p for i, item in enumerate(value) for p in problems(item, args[0],
                                                                    f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a dict"]
        return [p for k, item in value.items() for p in problems(item, args[1],
                                                                 f"{where}[{k!r}]")]
    return []  # a scalar, Any or a Literal: the keys are what a cast can get wrong


def assert_shaped(value: Any, declared: Any) -> None:
    found = problems(value, declared)
    assert not found, "\n".join(found)
