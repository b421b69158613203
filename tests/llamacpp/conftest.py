"""The llamacpp tests run llama-server, which tools/llamacpp/build.sh builds once (minutes):
they run only when asked for (-m llamacpp), and skip saying why where the binary is
missing. The converter's own tests here run in the default suite."""

from __future__ import annotations

import pytest

from tuner import llamacpp


def pytest_collection_modifyitems(config, items):
    if "llamacpp" in (config.getoption("markexpr") or ""):
        return
    opt_in = pytest.mark.skip(reason="runs llama-server: opt in with -m llamacpp")
    for item in items:
        if item.get_closest_marker("llamacpp"):
            item.add_marker(opt_in)


@pytest.fixture(scope="session")
def llama_server():
    binary = llamacpp.server_binary()
    if not binary.is_file():
        pytest.skip(f"{binary} is missing: run {llamacpp.BUILD} (builds llama-server once)")
    return binary
