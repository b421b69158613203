"""Workloads: the built-ins, JSON-lines files with bad lines named, and how a session runs
turns (fresh conversations, warm multi-turn ones, max_tokens)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tuner.engine.session import workloads
from tuner.engine.session.session import Session
from tuner.settings import SettingsError, load
from tuner.vocabulary import workload
from tuner.vocabulary.workload import WorkloadError


def topics_of(w: workload.Workload, topics: int) -> set[int]:
    return {t % topics for c in w.conversations for turn in c for t in turn.prompt}


def test_shifted_uses_only_topics_the_other_workloads_never_use():
    others = set()
    for name in ("chat-cold", "chat-warm", "long-prompt"):
        others |= topics_of(workloads.builtin(name, 0, 1024, 16), 16)
    shifted = topics_of(workloads.builtin("shifted", 0, 1024, 16), 16)
    assert shifted and others and not shifted & others
    warm = workloads.builtin("chat-warm", 0, 1024, 16)
    assert all(len(c) == 4 for c in warm.conversations)
    assert all(len(turn.prompt) == 192 for c in workloads.builtin("long-prompt", 0, 1024, 16)
               .conversations for turn in c)


def test_a_file_with_bad_lines_is_one_error_naming_each_line(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt": "ka lo", "max_tokens": 4}\n\n{"turns": []}\nnot json\n'
                    '{"prompt": "mi", "max_tokens": 0}\n{"prompt": "x", "extra": 1}\n')
    with pytest.raises(WorkloadError) as err:
        workload.read_file(path)
    text = str(err.value)
    assert str(path) in text and "line 1" not in text
    for line in ("line 3: prompt must be", "line 4: not JSON", "line 5: max_tokens 0",
                 "line 6: unknown keys extra"):
        assert line in text
    assert 'each line is {"prompt"' in text
    with pytest.raises(SettingsError, match="line 3"):  # the knob checks the file too
        load(cli={"workload": str(path)})
    with pytest.raises(SettingsError, match="neither a built-in"):
        load(cli={"workload": "nonesuch"})


def test_warm_turns_continue_the_conversation_and_cold_ones_start_anew(tiny_config,
                                                                       tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text('{"turns": ["ka lo mi ne ru ta shi po ve", "da zu ri an el os um ka lo"],'
                    ' "max_tokens": 5}\n{"prompt": "lo lo lo lo lo lo lo lo lo lo", '
                    '"max_tokens": 3}\n')
    s = Session(replace(tiny_config, workload=str(path)))
    s.run(9 + 5 + 9)  # first turn, its answer, the second turn's prompt
    assert (s.conversations, s.pos, s.snapshot()["workload"]["turn"]) == (1, 23, 2)
    s.run(5 + 10 + 3)  # the second answer, then a fresh conversation of one turn
    snap = s.snapshot()
    assert (s.conversations, s.pos) == (2, 13)
    assert snap["workload"] == {"name": "chat.jsonl", "conversations": 2, "turn": 1}
    assert snap["phases"]["prefill"]["prompts"] == 3
    assert snap["phases"]["decode"]["tokens"] == 5 + 5 + 3
    s.engine.close()


def test_text_prompts_need_a_tokenizer(tiny_config, tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt": "ka lo"}\n')
    (tmp_path / "model").symlink_to(tiny_config.model)
    folder = tmp_path / "bare"
    folder.mkdir()
    for f in (tmp_path / "model").iterdir():
        if f.name != "tokenizer.json":
            (folder / f.name).symlink_to(f)
    with pytest.raises(WorkloadError, match="no tokenizer.json"):
        Session(replace(tiny_config, model=str(folder), workload=str(path)))
