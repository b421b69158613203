"""Preset files: partial settings documents in TOML, with metadata.

    [preset]
    name = "seed000-route"
    description = "..."
    created = "2026-11-29T12:00:00+00:00"
    engine_version = "0.1.0"
    based_on = "baseline"

    [knobs]            # only the knobs that differ from the defaults
    moce_bonus = 0.85

Shipped presets live in the repository's `presets/` folder and are read-only: no user
preset may be saved under a shipped name (a user file of that name, made by hand, shadows
the shipped one). Saving over a user preset needs `overwrite`, and keeps its description
unless a new one is given. Names are plain words (letters, digits, `.`, `_`, `-`), matched
in full, so no name can reach outside its folder. Writes are atomic (temporary file, then
rename) and one store makes one change at a time. A broken file, whatever is wrong with it,
is reported with its path (and line where there is one), never raised past the store.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
import threading
import time
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tomli_w

from tuner import __version__
from tuner.knobs import BY_NAME
from tuner.settings import Settings, SettingsError, non_default, normalise, validate
from tuner.vocabulary import inputs
from tuner.vocabulary.presets import NAME_RE, PresetError, check_name

META_KEYS = ("name", "description", "created", "engine_version", "based_on")
STALE_TEMP_S = 60.0  # a temporary file older than this was left by a writer that died


class PresetNotFound(PresetError):
    """No preset of that name (or it went away while being read)."""


class PresetReadOnly(PresetError):
    """A shipped preset: it can be applied, not replaced or deleted."""


class PresetExists(PresetError):
    """A user preset of that name exists and the save did not say to overwrite it."""


class PresetWriteError(PresetError):
    """The user folder cannot take the file: `full` when out of space, else not writable."""

    def __init__(self, where: str, err: OSError):
        self.full = err.errno in (errno.ENOSPC, errno.EDQUOT)
        why = "no space left" if self.full else "not writable"
        super().__init__(where, f"cannot be saved: the presets folder is {why} "
                                f"({err.strerror or err})")


@dataclass
class Preset:
    name: str
    knobs: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    shipped: bool = False

    def settings(self, base: Settings | None = None) -> Settings:
        """The preset's knobs on top of `base` (defaults when None)."""
        start = base.model_dump() if base is not None else {}
        return validate({**start, **self.knobs})

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "meta": self.meta, "knobs": self.knobs,
                "shipped": self.shipped}


def shipped_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "presets"


def user_dir() -> Path:
    base = os.environ.get("TUNER_HOME") or os.path.join(
        os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"), "tuner")
    return Path(base) / "presets"


def _line_of(text: str, key: str) -> int | None:
    """Line of `key = ...` or of the table header `[key]`."""
    k = re.escape(key)
    m = re.search(rf"^\s*(?:[\"']?{k}[\"']?\s*=|\[\s*{k}\s*\])", text, re.MULTILINE)
    return text.count("\n", 0, m.start()) + 1 if m else None


def _toml_error_line(err: tomllib.TOMLDecodeError, text: str) -> int | None:
    m = re.search(r"at line (\d+)", str(err))
    if m:
        return int(m.group(1))
    return text.count("\n") + (not text.endswith("\n")) if "end of document" in str(err) else None


def parse(text: str, where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(knobs, meta) of a preset document; raises PresetError naming the line."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise PresetError(where, f"not valid TOML: {err}", _toml_error_line(err, text)) from None
    except RecursionError:
        raise PresetError(where, "not a preset: values nested too deeply") from None
    except ValueError as err:  # what tomllib lets through, such as a 5,000-digit integer
        raise PresetError(where, f"not valid TOML: {err}") from None
    extra = set(doc) - {"preset", "knobs"}
    if extra:
        key = sorted(extra)[0]
        raise PresetError(where, f"unknown table or key {key!r}; a preset has [preset] "
                          "and [knobs]", _line_of(text, key))
    meta = doc.get("preset", {})
    knobs = doc.get("knobs", {})
    if not isinstance(meta, dict) or not isinstance(knobs, dict):
        raise PresetError(where, "[preset] and [knobs] must be tables")
    bad_meta = set(meta) - set(META_KEYS)
    if bad_meta:
        key = sorted(bad_meta)[0]
        raise PresetError(where, f"unknown [preset] key {key!r}; allowed: "
                          f"{', '.join(META_KEYS)}", _line_of(text, key))
    try:
        knobs = normalise(knobs)
        validate(knobs)
    except SettingsError as err:
        key, msg = next(iter(err.problems.items()))
        raise PresetError(where, msg, _line_of(text, key)) from None
    return knobs, meta


def load_file(path: Path, shipped: bool = False) -> Preset:
    path = Path(path)
    try:  # a preset is a few hundred bytes; a file over the limit is not one
        text = inputs.read_text(path, inputs.PRESET)
    except inputs.Missing:
        raise PresetNotFound(str(path), "no such preset file") from None
    except inputs.PathError as err:
        raise PresetError(str(path), err.why) from None
    except OSError as err:
        raise PresetError(str(path), f"cannot be read: {err.strerror or err}") from None
    knobs, meta = parse(text, str(path))
    return Preset(meta.get("name", path.stem), knobs, meta, path, shipped)


class Store:
    """Shipped and user presets; lookups by name, never by path."""

    def __init__(self, user: Path | None = None, shipped: Path | None = None):
        self.user = Path(user) if user else user_dir()
        self.shipped = Path(shipped) if shipped else shipped_dir()
        # One change at a time: a save and a delete of one name never interleave.
        self._lock = threading.RLock()

    def _path(self, name: str) -> tuple[Path, bool]:
        check_name(name)
        for folder, shipped in ((self.user, False), (self.shipped, True)):
            p = folder / f"{name}.toml"
            if p.is_file():
                return p, shipped
        raise PresetNotFound(name, f"no preset of that name; known: {', '.join(self.names())}")

    def names(self) -> list[str]:
        found = {p.stem for d in (self.user, self.shipped) if d.is_dir()
                 for p in d.glob("*.toml") if NAME_RE.fullmatch(p.stem)}
        return sorted(found)

    def get(self, name: str) -> Preset:
        with self._lock:
            path, shipped = self._path(name)
            preset = load_file(path, shipped)
        preset.name = name
        return preset

    def list(self) -> list[dict[str, Any]]:
        """Every preset with its metadata; broken ones are listed with their error."""
        out = []
        for name in self.names():
            try:
                p = self.get(name)
                out.append({"name": name, "shipped": p.shipped, "meta": p.meta,
                            "knobs": p.knobs, "error": None})
            except PresetNotFound:  # deleted since it was listed
                continue
            except PresetError as err:
                out.append({"name": name, "shipped": None, "meta": {}, "knobs": {},
                            "error": str(err)})
        return out

    def save(self, name: str, settings: Settings, description: str | None = None,
             based_on: str | None = None, overwrite: bool = False) -> Preset:
        """`description` None keeps the description of the preset it replaces."""
        check_name(name)
        if (self.shipped / f"{name}.toml").is_file():
            raise PresetReadOnly(name, "a shipped preset has that name, and shipped presets "
                                 "cannot be replaced; save under another name")
        path = self.user / f"{name}.toml"
        with self._lock:
            if path.is_file():
                if not overwrite:
                    raise PresetExists(name, "a user preset of that name exists; overwrite it "
                                       "or save under another name")
                if description is None:
                    try:
                        description = load_file(path).meta.get("description", "")
                    except PresetError:  # replacing a broken file: nothing to keep
                        description = ""
            meta = {"name": name, "description": description or "",
                    "created": datetime.now(UTC).isoformat(timespec="seconds"),
                    "engine_version": __version__}
            if based_on:
                meta["based_on"] = based_on
            knobs = non_default(settings)
            try:
                self._write(name, {"preset": meta, "knobs": knobs})
            except OSError as err:
                raise PresetWriteError(f"{path}", err) from None
        return Preset(name, knobs, meta, path, False)

    def _write(self, name: str, doc: dict[str, Any]) -> None:
        self.user.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.user, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                tomli_w.dump(doc, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.user / f"{name}.toml")
        except BaseException:
            os.unlink(tmp)
            raise

    def delete(self, name: str) -> None:
        check_name(name)
        with self._lock:
            try:
                (self.user / f"{name}.toml").unlink()
            except FileNotFoundError:
                if (self.shipped / f"{name}.toml").is_file():
                    raise PresetReadOnly(name, "shipped presets cannot be deleted") from None
                raise PresetNotFound(name, "no user preset of that name") from None
            except OSError as err:
                raise PresetWriteError(f"{self.user / name}.toml", err) from None

    def clean(self) -> list[Path]:
        """Removes temporary files that writers killed mid-save left behind; returns them."""
        cutoff = time.time() - STALE_TEMP_S
        removed = []
        with self._lock:
            for tmp in self.user.glob(".*.tmp") if self.user.is_dir() else ():
                try:
                    if tmp.stat().st_mtime < cutoff:
                        tmp.unlink()
                        removed.append(tmp)
                except OSError:  # gone already, or not ours to remove: left as it is
                    continue
        return removed


def resolve(ref: str, store: Store | None = None) -> Preset:
    """A preset given on the command line: a name in the store, or a path to a .toml file."""
    if ref.endswith(".toml") or os.sep in ref:
        return load_file(Path(ref))
    return (store or Store()).get(ref)


def knob_diff(a: Settings, b: Settings) -> list[dict[str, Any]]:
    """Rows of knobs whose values differ, in knob-table order, as plain data."""
    da, db = a.model_dump(mode="json"), b.model_dump(mode="json")
    return [{"knob": k, "env": BY_NAME[k].env, "a": da[k], "b": db[k]}
            for k in BY_NAME if da[k] != db[k]]
