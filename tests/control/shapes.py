"""Whether an answer has the shape its type declares: a TypedDict's or a model's keys
exactly (its required ones, and none it does not name), in every TypedDict, model, list and
mapping within, whether the answer is in hand or its JSON. What a cast at the control
plane's boundary (tuner.control.controller) takes on trust, checked on real answers."""

from __future__ import annotations

import types
import typing
from typing import Any, get_args, get_origin, get_type_hints

from pydantic import BaseModel
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
    model = isinstance(declared, type) and issubclass(declared, BaseModel)
    if model and isinstance(value, BaseModel):
        value = {name: getattr(value, name) for name in type(value).model_fields}
    if model or is_typeddict(declared):
        if model:
            hints = {name: f.annotation for name, f in declared.model_fields.items()}
            required = {name for name, f in declared.model_fields.items() if f.is_required()}
        else:
            hints = get_type_hints(declared, include_extras=True)
            required = declared.__required_keys__
        return _keyed(value, declared.__name__, hints, required, where)
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


def _keyed(value: Any, name: str, hints: dict[str, Any], required: set[str] | frozenset[str],
           where: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: {type(value).__name__}, not a {name}"]
    missing, extra = required - value.keys(), value.keys() - hints.keys()
    out = [f"{where}: {name} lacks {sorted(missing)}"] if missing else []
    out += [f"{where}: {name} has undeclared {sorted(extra)}"] if extra else []
    for key in value.keys() & hints.keys():
        out += problems(value[key], hints[key], f"{where}.{key}")
    return out


def assert_shaped(value: Any, declared: Any) -> None:
    found = problems(value, declared)
    assert not found, "\n".join(found)
