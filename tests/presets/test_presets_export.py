"""Presets out of tuner and back: env files that round-trip through the environment's own
parsing, JSON, the closest llama.cpp flags, and env files imported with bad lines named."""

from __future__ import annotations

import json
import re

import pytest

from tuner import settings
from tuner.cli import main
from tuner.presets import Preset, PresetError, Store, shipped_dir
from tuner.presets.export import EXPS, ImportProblems, import_env, import_file, to_env

SHIPPED = sorted(p.stem for p in shipped_dir().glob("*.toml"))


def test_there_are_shipped_presets_to_check():
    assert {"baseline", "seed000-route", "seed002-x4"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_env_export_then_import_gives_the_same_settings(name, tmp_path, capsys):
    out = tmp_path / f"{name}.env"
    assert main(["presets", "export", name, "-o", str(out)]) == 0
    assert main(["presets", "import", str(out), "--name", f"back-{name}"]) == 0
    store = Store()
    assert store.get(f"back-{name}").settings() == store.get(name).settings()


def test_an_import_says_which_knobs_it_left_out_at_their_defaults(tuner_home, tmp_path,
                                                                 capsys):
    """A preset file may name a knob at its default; a saved preset holds only what differs
    from the defaults, so the import says what it read and what it kept."""
    (tuner_home / "presets").mkdir(parents=True)
    (tuner_home / "presets" / "spelled.toml").write_text(
        '[knobs]\ndecode_2q = true\nprefetch = "off"\nmoce_protect = 3\n')
    out = tmp_path / "spelled.env"
    assert main(["presets", "export", "spelled", "-o", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 3
    assert main(["presets", "import", str(out), "--name", "back"]) == 0
    said = capsys.readouterr().out.strip()
    assert said.endswith(": 3 knobs read, 1 kept; left out at their defaults (a preset holds "
                         "what differs from them): STRATA_METAL_MOCE_PROTECT, STRATA_PREFETCH")
    assert Store().get("back").knobs == {"cache_policy": "2q"}


@pytest.mark.parametrize("name", SHIPPED)
def test_env_lines_are_what_the_environment_reads(name, monkeypatch):
    preset = Store().get(name)
    for line in to_env(preset).splitlines():
        key, _, value = line.partition("=")
        monkeypatch.setenv(key, value)
    assert settings.load() == preset.settings()


def test_values_an_env_line_cannot_carry_are_refused():
    preset = Preset("spaced", {"model": "/models/my model"})
    with pytest.raises(PresetError, match="STRATA_MODEL = '/models/my model' holds a space"):
        to_env(preset)


def test_bad_lines_are_reported_by_number():
    text = ("# a comment\n\nSTRATA_NOPE=1\nfoo\nSTRATA_PREFETCH=sometimes\nPATH=/bin\n"
            "export STRATA_SEED='5'\nSTRATA_SEED=6\nSTRATA_METAL_MOCE_BONUS=0.5\n")
    with pytest.raises(ImportProblems) as err:
        import_env(text, "f.env")
    assert [line for line, _ in err.value.problems] == [3, 4, 5, 6, 8]
    message = str(err.value)
    assert "f.env:5: prefetch (STRATA_PREFETCH) = 'sometimes' is not allowed: expected " \
           "one of off, prev, stale" in message
    assert "f.env:8: STRATA_SEED is set again (first on line 7)" in message
    assert import_env("export STRATA_SEED='5'\nSTRATA_METAL_MOCE_BONUS=\"0.5\"\n", "f") == \
        {"seed": 5, "moce_bonus": 0.5}
    with pytest.raises(ImportProblems, match="io_urgent \\(9\\) must be less than io_workers"):
        import_env("STRATA_IO_URGENT=9\n", "f.env")


def test_import_refuses_names_in_use(tmp_path):
    env = tmp_path / "mine.env"
    env.write_text("STRATA_METAL_DECODE_2Q=1\n")
    store = Store()
    assert import_file(store, env).knobs == {"cache_policy": "2q"}
    with pytest.raises(PresetError, match="give --overwrite"):
        import_file(store, env)
    import_file(store, env, overwrite=True)
    with pytest.raises(PresetError, match="is a shipped preset"):
        import_file(store, env, name="2q", overwrite=True)


def test_json_export_is_the_whole_settings(capsys):
    assert main(["presets", "export", "seed000-route", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["knobs"]["moce_bonus"] == 0.85
    assert doc["settings"] == Store().get("seed000-route").settings().model_dump(mode="json")


def llama(capsys, *argv) -> tuple[list[str], str]:
    assert main(["presets", "export", *argv, "--format", "llama.cpp"]) == 0
    text = capsys.readouterr().out
    comments = [line for line in text.splitlines() if line.startswith("#")]
    return comments, text.splitlines()[-1]


def test_llama_cpp_keeps_the_largest_quotas_layers_on_the_gpu(capsys):
    quotas = [10] * 16
    quotas[3], quotas[7], quotas[12] = 70, 70, 70  # 400 slots: 6 whole layers of 64
    quotas[0], quotas[1], quotas[2] = 30, 30, 30
    Store().save("split", settings.validate({
        "expert_cache": sum(quotas), "arena_split": "layers",
        "arena_budgets": ",".join(map(str, quotas)), "moce_bonus": 0.85}))
    comments, flags = llama(capsys, "split")
    pattern = re.search(r"-ot '([^']+)=CUDA0' -ot '([^']+)=CPU'", flags)
    gpu, cpu = pattern.groups()
    assert gpu == r"blk\.(0|1|2|3|7|12)\." + EXPS and cpu == EXPS
    assert re.search(gpu, "blk.12.ffn_up_exps.weight")
    assert not re.search(gpu, "blk.13.ffn_down_exps.weight")
    assert not re.search(gpu, "blk.4.attn_q.weight")
    assert "--n-gpu-layers 999" in flags and "--temp 0.8" in flags
    text = "\n".join(comments)
    assert "becomes 6 whole layer(s)" in text
    assert "#   STRATA_METAL_MOCE_BONUS=0.85" in comments  # no equivalent, named


@pytest.mark.parametrize("name", ["baseline", "seed002-x4"])
def test_llama_cpp_for_a_cpu_machine_puts_nothing_on_a_gpu(name, capsys):
    """The placement's form stays (a CPU-only build takes it), its words do not say that
    layers go to a GPU the machine does not have."""
    comments, flags = llama(capsys, name, "--target", "cpu")
    text = " ".join(c.lstrip("# ") for c in comments)
    assert "on the GPU" not in text and "CUDA0" not in flags
    assert "On a cpu machine every layer stays in host RAM" in text
    assert llama(capsys, name)[0] != comments  # the same preset for a GPU says otherwise


def test_llama_cpp_of_one_shared_arena_is_n_cpu_moe(capsys, tiny_model):
    comments, flags = llama(capsys, "baseline")
    assert "--n-cpu-moe 13" in flags  # demo model: 205 slots = 3 of 16 layers of 64
    Store().save("tiny-small", settings.validate({"expert_cache": 8}))
    _, flags = llama(capsys, "tiny-small", "--model", str(tiny_model))
    assert "--cpu-moe" in flags.split()  # 8 slots: not one whole layer of 16


def test_llama_cpp_of_budgets_for_another_model_is_refused(capsys, tiny_model):
    Store().save("demo-split", settings.validate({"arena_split": "layers",
                                                  "arena_budgets": "13," * 15 + "10"}))
    assert main(["presets", "export", "demo-split", "--format", "llama.cpp", "--model",
                 str(tiny_model)]) == 2
    assert "16 quotas for a model of 4 layers" in capsys.readouterr().err
