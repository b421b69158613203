"""Presets taken out of `tuner` and brought back in.

* `env`: one `STRATA_*=value` line per knob the preset sets, with no quotes and no
  comments, so systemd's EnvironmentFile and `env $(cat FILE)` read it alike;
  `import_env` reads such a file back through the very parsing the environment goes
  through (`tuner.settings.env_values`).
* `json`: the preset's metadata, its knobs and the whole settings they give.
* `llama.cpp`: the closest expert-offload flags. llama.cpp places each layer's experts
  whole, on the GPU or in host RAM, once at load (`-ot` / `--override-tensor`, and
  `--n-cpu-moe N` for the first N layers); an arena of N slots becomes N // experts whole
  layers, those with the largest quotas, and `--target` names the buffer type of the
  machine the flags are for. A comment block says what has no equivalent.
"""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import TunerError
from tuner.knobs import INPUT_KNOBS, KNOBS, Knob, written
from tuner.llamacpp import EXPS
from tuner.presets.store import Preset, PresetError, Store, check_name
from tuner.settings import Settings, SettingsError, env_values, validate
from tuner.vocabulary import inputs, recipes
from tuner.vocabulary.model_config import ModelConfig
from tuner.vocabulary.slots import arena_slots, quotas_for

FORMATS = ("env", "json", "llama.cpp")
# A value both EnvironmentFile and the shell's word splitting pass on unchanged.
PLAIN_VALUE = re.compile(r"^[^\s\"'\\$`#;]*$")
# tuner knob -> the llama.cpp flag that does the same (approximately, as the comment says)
# (tuner's `threads` is the decoding thread's intra-op count, not llama.cpp's CPU threads)
LLAMA_FLAGS = {"temperature": "--temp", "seed": "--seed", "context": "--ctx-size"}
PLACEMENT = ("expert_cache", "arena_split", "arena_budgets", "device")  # become -ot flags
# --target -> the buffer type llama.cpp names the GPU's memory by (`-ot PATTERN=BUFFER`): the
# first CUDA device; Apple's first Metal device (llama.cpp builds before the per-device
# names called it "Metal"); CPU on a machine without a GPU, where a CPU-only build knows no
# other buffer type and refuses the rest ("unknown buffer type").
TARGETS = {"cuda": "CUDA0", "metal": "MTL0", "cpu": "CPU"}

# The environment names an env file may hold: the knobs' and the older names still read.
ENV_OF = {k.name: k.env for k in INPUT_KNOBS}
ENVS = set(ENV_OF.values())


class ImportProblems(TunerError, ValueError):
    """Lines of an env file that could not be read; each names its line number."""

    def __init__(self, where: str, problems: list[tuple[int | None, str]]):
        self.problems = problems
        super().__init__("\n".join(f"{where}:{line}: {msg}" if line else f"{where}: {msg}"
                                   for line, msg in problems))


def env_value(knob: Knob, value) -> str:
    if knob.type is bool:
        return "1" if value else "0"
    text = repr(value) if knob.type is float else str(written(value))
    if not PLAIN_VALUE.match(text):
        raise PresetError(knob.name, f"{knob.env} = {text!r} holds a space, quote, '\\', '$', "
                          "'`', '#' or ';', which an env file line cannot carry unquoted")
    return text


def to_env(preset: Preset) -> str:
    return "".join(f"{k.env}={env_value(k, preset.knobs[k.name])}\n"
                   for k in KNOBS if k.name in preset.knobs)


def to_json(preset: Preset) -> str:
    doc = {**preset.as_dict(), "settings": preset.settings().model_dump(mode="json")}
    return json.dumps(doc, indent=1) + "\n"


def import_env(text: str, where: str) -> dict:
    """The knobs of an env file of STRATA_* lines; raises ImportProblems naming each bad
    line. Blank lines, `#` comments, `export ` and quotes around a value are allowed."""
    problems: list[tuple[int | None, str]] = []
    values: dict[str, str] = {}
    line_of: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.removeprefix("export ").partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            problems.append((number, f"expected NAME=VALUE, got {inputs.brief(raw)}"))
            continue
        if key not in ENVS:
            problems.append((number, f"{key} is not a tuner knob's environment name (see "
                                     "`tuner knobs`)"))
            continue
        if key in line_of:
            problems.append((number, f"{key} is set again (first on line {line_of[key]})"))
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key], line_of[key] = value, number
    try:
        knobs = env_values(values)
    except SettingsError as err:
        problems += [(line_of[ENV_OF[name]], msg) for name, msg in err.problems.items()]
        knobs = {}
    try:  # the values that parsed, checked together: a knob's problem is on its line
        validate(knobs)
    except SettingsError as err:
        problems += [(line_of.get(ENV_OF.get(name, "")), msg)
                     for name, msg in err.problems.items()]
    if problems:
        raise ImportProblems(where, sorted(problems, key=lambda p: p[0] or 0))
    return knobs


def import_file(store: Store, path: Path, name: str | None = None, description: str = "",
                overwrite: bool = False) -> Preset:
    """Saves env file `path` as user preset `name` (default: the file's stem). A name in
    use is refused unless `overwrite`, and a shipped one always."""
    name = check_name(name or path.stem)
    try:
        text = inputs.read_text(path, inputs.ENV_FILE)
    except inputs.PathError as err:
        raise PresetError(str(path), err.why) from None
    except OSError as err:
        raise PresetError(str(path), f"cannot be read: {err.strerror or err}") from None
    knobs = import_env(text, str(path))
    if name in store.names():
        if store.get(name).shipped:
            raise PresetError(name, "is a shipped preset; import under another --name")
        if not overwrite:
            raise PresetError(name, "a user preset of that name exists; give --overwrite "
                              "to replace it, or another --name")
    return store.save(name, validate(knobs), description or f"imported from {path.name}",
                      overwrite=overwrite)


def model_shape(settings: Settings, model: str | None) -> tuple[str, ModelConfig]:
    """(name, config) of `model`, else of the preset's model, else of the demo model."""
    folder = model or settings.model
    if folder:
        return Path(folder).name, ModelConfig.read(Path(folder))
    return recipes.DEFAULT.id, ModelConfig.from_hf(recipes.DEFAULT.hf_config())


@dataclass(frozen=True)
class Placement:
    """The llama.cpp flags closest to a preset (argv words, unquoted), and what they place
    where: `pinned` maps
    each layer whose expert tensors the flags override to the buffer type they name (the
    layers llama.cpp's -v log reports as "buffer type overridden to ..."); a layer not in
    it keeps llama.cpp's own placement."""

    flags: list[str]
    pinned: dict[int, str]
    notes: list[str]


def llama_cpp_placement(preset: Preset, model: str | None = None,
                        target: str = "cuda") -> Placement:
    s = preset.settings()
    if target not in TARGETS:
        raise PresetError(target, f"unknown llama.cpp target; allowed: {', '.join(TARGETS)}")
    gpu_buffer = TARGETS[target]
    try:
        name, mc = model_shape(s, model)
        L, E = mc.num_layers, mc.num_experts
        slots = arena_slots(s.expert_cache, L, E)
        quotas = quotas_for(s.arena_split, s.arena_budgets, L, slots)
    except (OSError, ValueError) as err:  # no model there, or budgets of another model
        raise PresetError(preset.name, f"cannot be placed on that model: {err}") from None
    whole = min(L, slots // E)
    held = ("keep their experts on the GPU" if target != "cpu" else
            "are the ones a GPU machine would hold")
    notes = [f"llama.cpp flags closest to tuner preset '{preset.name}' on {name} ({L} layers x "
             f"{E} experts, top-{mc.top_k}) for a {target} machine; append them to "
             "`llama-server -m MODEL.gguf`.",
             f"tuner's arena of {slots} slots ({100 * slots / (L * E):.1f} % of the layer-expert "
             "pairs) follows the routing expert by expert; llama.cpp places each layer's "
             f"experts whole, once at load, so it becomes {whole} whole layer(s) of {E} experts "
             + ("on the GPU and the rest in host RAM, computed there." if target != "cpu" else
                "on a machine with a GPU. On a cpu machine every layer stays in host RAM and "
                "is computed there: the flags below keep that placement's form with CPU "
                "buffers (all a CPU-only build knows, and it ignores --n-gpu-layers), so they "
                "change nothing here.")]
    if quotas is None:
        gpu = list(range(L - whole, L))
        notes.append("one shared arena (arena_split = global) says nothing about which layers "
                     f"gain most: the last layers {held}.")
    else:
        ranked = sorted(range(L), key=lambda l: (-quotas[l], l))
        gpu = sorted(ranked[:whole])
        notes.append(f"the layers with the largest quotas {held} "
                     f"(quotas: {', '.join(map(str, quotas))}).")
    flags = [] if s.device == "cpu" else ["--n-gpu-layers", "999"]
    pinned: dict[int, str] = {}
    if s.device == "cpu":
        notes.append("device = cpu: every layer runs on the CPU (no -ngl).")
    elif whole == 0:
        flags.append("--cpu-moe")
        pinned = dict.fromkeys(range(L), "CPU")
    elif whole < L and gpu == list(range(L - whole, L)):
        flags += ["--n-cpu-moe", str(L - whole)]
        pinned = dict.fromkeys(range(L - whole), "CPU")
    elif whole < L:
        layers = "|".join(map(str, gpu))
        flags += ["-ot", f"blk\\.({layers})\\.{EXPS}={gpu_buffer}", "-ot", f"{EXPS}=CPU"]
        pinned = {l: gpu_buffer if l in gpu else "CPU" for l in range(L)}
        notes.append("the first -ot names the buffer type those layers' experts go to on a "
                     f"{target} machine: {gpu_buffer} (--target: "
                     f"{', '.join(f'{t} {b}' for t, b in TARGETS.items())}, where a machine "
                     "without a GPU keeps every layer in host RAM). The first pattern a tensor "
                     "matches wins.")
    for knob, flag in LLAMA_FLAGS.items():
        flags += [flag, str(getattr(s, knob))]
    return Placement(flags, pinned, notes)


def to_llama_cpp(preset: Preset, model: str | None = None, target: str = "cuda") -> str:
    placement = llama_cpp_placement(preset, model, target)
    missing = [k for k in KNOBS if k.name not in (*LLAMA_FLAGS, *PLACEMENT)]
    set_here = [k for k in missing if k.name in preset.knobs]
    lines = [*(wrapped for note in placement.notes for wrapped in textwrap.wrap(note, 86)),
             "no llama.cpp equivalent, set by this preset (dropped):"]
    lines += [f"  {k.env}={env_value(k, preset.knobs[k.name])}" for k in set_here] or ["  none"]
    lines += textwrap.wrap("no llama.cpp equivalent, at their defaults here: "
                           + ", ".join(k.name for k in missing if k not in set_here) + ".", 86)
    return "".join(f"# {line}\n" for line in lines) + shlex.join(placement.flags) + "\n"


def export(preset: Preset, fmt: str, model: str | None = None, target: str = "cuda") -> str:
    if fmt == "env":
        return to_env(preset)
    if fmt == "json":
        return to_json(preset)
    if fmt == "llama.cpp":
        return to_llama_cpp(preset, model, target)
    raise PresetError(fmt, f"unknown export format; allowed: {', '.join(FORMATS)}")
