"""The llamacpp tests run llama-server and llama-bench, which tools/llamacpp/build.sh builds
once (minutes): they run only when asked for (-m llamacpp), and skip saying why where the
program is missing. The converter's and the bench section's own tests here run in the
default suite."""

from __future__ import annotations

import pytest

from tuner import llamacpp


def pytest_collection_modifyitems(config, items):
    if "llamacpp" in (config.getoption("markexpr") or ""):
        return
    opt_in = pytest.mark.skip(reason="runs llama.cpp: opt in with -m llamacpp")
    for item in items:
        if item.get_closest_marker("llamacpp"):
            item.add_marker(opt_in)


@pytest.fixture(scope="session")
def llama_server():
    binary = llamacpp.server_binary()
    if not binary.is_file():
        pytest.skip(f"{binary} is missing: run {llamacpp.BUILD} (builds llama-server once)")
    return binary


@pytest.fixture(scope="session")
def llama_bench():
    binary = llamacpp.program("llama-bench")
    if not binary.is_file():
        pytest.skip(f"{binary} is missing: run {llamacpp.BUILD} --targets llama-bench")
    return binary
