"""Scratch: the throwaway `checkres_every` knob reaches every surface the recipe names."""
from dataclasses import replace

import httpx
import pytest

from tuner import settings
from tuner.cli import build_parser
from tuner.engine.session.session import Session
from tuner.presets.export import import_env
from tuner.settings import SettingsError
from tuner.tune.space import build_space


def windows(cfg, every):
    s = Session(replace(cfg, adapt_checkres=True, checkres_every=every))
    s.run(40)
    snap = s.snapshot()
    s.engine.close()
    return snap["totals"]["checkres_windows"], s.engine.steps


def test_the_engine_reads_it(tiny_config):
    every_token, steps = windows(tiny_config, 1)
    every_fourth, _ = windows(tiny_config, 4)
    assert every_token > every_fourth > 0 and every_fourth <= 4 * (steps // 4 + 2)


def test_env_flag_validation_presets_tune(monkeypatch):
    monkeypatch.setenv("STRATA_CHECKRES_EVERY", "3")
    assert settings.load().checkres_every == 3
    monkeypatch.delenv("STRATA_CHECKRES_EVERY")
    assert build_parser(["run"]).parse_args(["run", "--checkres-every", "5"]).knob_checkres_every == "5"
    with pytest.raises(SettingsError, match=r"int in \[1, 64\]"):
        settings.apply(settings.defaults(), {"checkres_every": 0})
    assert import_env("STRATA_CHECKRES_EVERY=6\n", "x.env")["checkres_every"] == 6
    assert "checkres_every" in {d.name for d in build_space().dimensions}


def test_the_page_and_rest(live):
    assert 'id="in-checkres_every"' in httpx.get(f"{live.url}/").text
    r = httpx.patch(f"{live.url}/api/settings", json={"checkres_every": 2})
    assert r.status_code < 300, r.text
    assert httpx.get(f"{live.url}/api/settings").json()["settings"]["checkres_every"] == 2
