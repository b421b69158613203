"""The one place settings become a running engine and its Controller (tuner.control.compose)."""

from __future__ import annotations

import os
import time

import pytest

from tuner.control import compose
from tuner.control.compose import open_controller, open_session
from tuner.presets import STALE_TEMP_S, Store
from tuner.settings import defaults, load
from tuner.vocabulary.model_config import ModelError


def test_a_controller_runs_the_settings_over_a_cleaned_store(tiny_overrides, tmp_path):
    left = tmp_path / ".mine.x.tmp"  # what a save killed mid-write leaves
    left.write_text("")
    os.utime(left, (time.time() - 2 * STALE_TEMP_S,) * 2)
    controller = open_controller(load(cli=tiny_overrides), Store(tmp_path))
    try:
        assert controller.store.user == tmp_path and not left.exists()
        assert controller.settings.expert_cache == controller.session.cfg.expert_cache == 16
        deadline = time.monotonic() + 60
        while controller.session.tokens < 2:  # started: it decodes
            assert time.monotonic() < deadline, "the session decoded nothing in 60 s"
            time.sleep(0.01)
    finally:
        controller.close()


def test_a_model_the_engine_refuses_keeps_its_own_line(tmp_path):
    missing = tmp_path / "no-model"
    with pytest.raises(ModelError, match=str(missing)):
        open_session(load(cli={"model": str(missing)}))


@pytest.mark.parametrize("failure", [OSError(5, "Input/output error"),
                                     ValueError("a header of 9 bytes in a file of 4")])
def test_a_file_the_engine_cannot_take_is_one_line_naming_the_model(failure, monkeypatch):
    def broken(*args, **kwargs):
        raise failure

    monkeypatch.setattr(compose, "Session", broken)
    with pytest.raises(ModelError, match=f"the demo model cannot be opened: .*{failure.args[-1]}"):
        open_session(defaults())
