"""The operations are declared once (tuner.control.api): every one is served by a route of
the real app where the remote backend sends it, with the body and query the declaration
implies, and is a Controller method of the same name, parameters and answer, which the
embedded backend calls and the route serves."""

from __future__ import annotations

import inspect
from typing import get_type_hints

import pytest
from pydantic import BaseModel
from starlette.routing import Match

from tests.ui.conftest import make_controller
from tuner.control.api import OPERATIONS, Backend
from tuner.control.controller import Controller
from tuner.web.app import create_app


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from tuner.engine.weights import synth

    model = synth.write(synth.TINY, tmp_path_factory.mktemp("models") / "tiny")
    controller = make_controller({"model": str(model), "expert_cache": 16, "io_workers": 3,
                                  "io_urgent": 1})
    yield create_app(controller)
    controller.close()


def routes(router):
    """Every route of `router`, those of the routers it includes too."""
    for route in router.routes:
        included = getattr(route, "original_router", None)  # fastapi includes lazily
        yield from routes(included) if included is not None else (route,)


def served_by(app, method: str, path: str):
    """The route of `app` a request `method path` reaches."""
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for route in routes(app.router):
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return route
    raise AssertionError(f"no route serves {method} {path}")


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_every_operation_is_served_where_the_remote_backend_sends_it(app, name):
    operation = OPERATIONS[name]
    declared = inspect.signature(operation.declared).parameters
    in_path = operation.route.path_names
    path = operation.route.path.format(**{n: "mine" for n in in_path})
    route = served_by(app, operation.route.method, path)
    dependant = route.dependant
    assert {p.name for p in dependant.query_params} >= set(operation.route.query)
    body = [n for n in declared if n not in ("self", *in_path, *operation.route.query)]
    if len(body) == 1 and isinstance(annotation := get_type_hints(operation.declared)[body[0]],
                                     type) and issubclass(annotation, BaseModel):
        assert [p.field_info.annotation for p in dependant.body_params] == [annotation]
    elif body and name != "change":  # change sends the mapping itself, read as a patch
        [model] = [p.field_info.annotation for p in dependant.body_params]
        assert set(body) <= set(model.model_fields), (name, body)


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_every_operation_is_the_controller_method_of_its_name(name):
    declared = OPERATIONS[name].declared
    method = getattr(Controller, name)
    ours = inspect.signature(declared).parameters
    theirs = inspect.signature(method).parameters
    assert [(p.name, p.default) for p in ours.values()] == \
        [(p.name, p.default) for p in theirs.values()], name
    assert get_type_hints(declared)["return"] == get_type_hints(method)["return"], name


def test_the_backend_declares_nothing_else_to_implement():
    """A backend implements the transport (`call`, `latest`) only: every operation comes
    from the declaration."""
    assert Backend.__abstractmethods__ == {"call", "latest"}
