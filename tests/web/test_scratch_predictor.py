"""Scratch: the throwaway `agree` predictor reads ahead, and every surface offers it."""
from dataclasses import replace

import httpx
import torch

from tuner import settings
from tuner.engine.session.session import Session
from tuner.engine.step.predict import PREDICTORS
from tuner.knobs import Config
from tuner.tune.space import build_space


def test_it_names_what_both_name():
    stale = torch.tensor([0.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    assert PREDICTORS["agree"].rank(Config(), 3, [3, 0, 1], stale, lambda: None) == [1, 3]
    assert PREDICTORS["agree"].rank(Config(), 3, None, stale, lambda: None) == []


def issued(cfg, prefetch):
    s = Session(replace(cfg, prefetch=prefetch, temperature=0.0))
    s.run(40)
    snap = s.snapshot()
    s.engine.close()
    return snap["phases"]["decode"]["pf_issued"]


def test_the_engine_reads_ahead_by_it(tiny_config):
    assert 0 < issued(tiny_config, "agree") <= issued(tiny_config, "stale")


def test_knob_tune_page(live):
    assert settings.apply(settings.defaults(), {"prefetch": "agree"}).prefetch == "agree"
    assert "agree" in {d.name: d for d in build_space().dimensions}["prefetch"].values
    assert "<option>agree</option>" in httpx.get(f"{live.url}/").text
    r = httpx.patch(f"{live.url}/api/settings", json={"prefetch": "agree"})
    assert r.status_code < 300, r.text
