"""Scratch: the throwaway `fifo` cache policy evicts, and every surface offers it."""
from dataclasses import replace

import httpx
import numpy as np
import pytest

from tuner import settings
from tuner.engine.session.session import Session
from tuner.settings import SettingsError
from tuner.traces.curve import hit_curve
from tuner.tune.space import build_space
from tuner.vocabulary.policies import POLICIES


def test_it_orders_by_insertion_only():
    lru, fifo = POLICIES["lru"](), POLICIES["fifo"]()
    for p in (lru, fifo):
        for slot in (1, 2, 3):
            p.insert(slot, speculative=False)
        p.claim(1)
    assert list(lru.victims()) == [2, 3, 1] and list(fifo.victims()) == [1, 2, 3]


def test_the_engine_evicts_by_it(tiny_config):
    s = Session(replace(tiny_config, cache_policy="fifo"))
    s.run(40)
    snap = s.snapshot()
    s.engine.close()
    assert snap["arena"]["policy"] == "fifo" and snap["totals"]["evictions"] > 0


def test_knob_tune_and_curves():
    assert settings.apply(settings.defaults(), {"cache_policy": "fifo"}).cache_policy == "fifo"
    with pytest.raises(SettingsError, match="one of lru, 2q, fifo"):
        settings.apply(settings.defaults(), {"cache_policy": "mru"})
    dims = {d.name: d for d in build_space().dimensions}
    assert "fifo" in dims["cache_policy"].values
    routings = np.random.default_rng(0).random((60, 4, 16)).argsort(axis=2)[:, :, :4]  # top-4
    curve = hit_curve(routings, 60, 16, 16, {})
    assert set(curve["hit_rate"]) == {"lru", "2q", "fifo", "opt"}


def test_the_page_offers_it(live):
    assert "<option>fifo</option>" in httpx.get(f"{live.url}/").text
    r = httpx.patch(f"{live.url}/api/settings", json={"cache_policy": "fifo"})
    assert r.status_code < 300, r.text


def test_replay_offers_it():
    from tuner.traces.modes import MODES
    assert "fifo" in MODES
