"""Tuning presets: partial settings documents, stored and exchanged.

store   preset files: the shipped and user folders, atomic writes, parsing, diffs
export  a preset as env lines, JSON or llama.cpp flags, and an env file read back in

A caller names the store's parts from here (`from tuner.presets import Store`); the
export side is imported where a command needs it (`tuner.presets.export`).
"""

from tuner.presets.store import (
    STALE_TEMP_S,
    Preset,
    PresetExists,
    PresetNotFound,
    PresetReadOnly,
    PresetWriteError,
    Store,
    knob_diff,
    load_file,
    parse,
    resolve,
    shipped_dir,
    user_dir,
)
from tuner.vocabulary.presets import BASELINE, PresetError, check_name

__all__ = ["BASELINE", "STALE_TEMP_S", "Preset", "PresetError", "PresetExists", "PresetNotFound",
           "PresetReadOnly", "PresetWriteError", "Store", "check_name", "knob_diff",
           "load_file", "parse", "resolve", "shipped_dir", "user_dir"]
