"""The engine's typed Config is generated from the knob table and kept current."""

from __future__ import annotations

from dataclasses import fields

from tuner.config import Config
from tuner.knobs import CONFIG_PATH, KNOBS, config_source


def test_config_py_is_the_knob_table():
    assert CONFIG_PATH.read_text() == config_source(), (
        "tuner/config.py is stale: run `python -m tuner.knobs --write-config`")


def test_config_has_one_typed_field_per_knob_with_its_default():
    assert [(f.name, f.type, f.default) for f in fields(Config)] == [
        (k.name, k.annotation, k.default) for k in KNOBS]
