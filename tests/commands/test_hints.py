"""What a newcomer's first mistakes are answered with: one line saying what to do, with the
exit status of its kind: a missing optional extra, a server that does not answer, a port
in use, prompt words the model does not know."""

from __future__ import annotations

import json
import sys

import pytest

from tuner.cli import main
from tuner.errors import Exit
from tuner.web.local import listening_socket


def tiny_flags(model) -> list[str]:
    return ["--model", str(model), "--expert-cache", "16", "--io-workers", "3",
            "--io-urgent", "1"]


@pytest.mark.parametrize("argv, extra, missing", [
    (["tune", "--trials", "1"], "tune", ("optuna", "tqdm", "tuner.tune.run")),
    (["model", "gguf", "tiny", "x.gguf"], "gguf", ("gguf", "tuner.llamacpp.convert")),
])
def test_a_missing_extra_is_one_line_with_the_install(argv, extra, missing, monkeypatch,
                                                      refuses, tmp_path):
    for module in missing:  # as if never installed (tuner's own: imported afresh)
        if module.startswith("tuner."):
            monkeypatch.delitem(sys.modules, module, raising=False)
        else:
            monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.chdir(tmp_path)
    refuses(argv, rf"is not installed; it comes with the {extra} extra: "
                  rf"pip install 'tuner\[{extra}\]'", Exit.UNAVAILABLE)


def test_a_server_that_does_not_answer_is_named_with_a_hint(refuses):
    with listening_socket() as sock:  # a port nobody listens on once it is closed
        port = sock.getsockname()[1]
    refuses(["presets", "apply", "2q", "--url", f"http://127.0.0.1:{port}"],
            r"nothing answers there .*; is `tuner serve` running, and on that port "
            r"\(its --port\)\?", Exit.UNAVAILABLE)


def test_a_port_in_use_is_named_before_any_model_loads(refuses):
    with listening_socket() as sock:
        port = sock.getsockname()[1]
        refuses(["serve", "--port", str(port), "--model", "/nowhere"],
                rf"cannot listen on 127.0.0.1:{port}: Address already in use; another "
                "program .* listens there; give another --port", Exit.UNAVAILABLE)


def test_words_the_model_does_not_know_are_named_with_its_vocabulary(tiny_model, capsys):
    assert main(["run", "--tokens", "8", "--prompt", "hello ka world", "--json",
                 *tiny_flags(tiny_model)]) == 0
    out, err = capsys.readouterr()
    says = ("2 prompt word(s) are not in the model's vocabulary and were read as <unk>: "
            "hello, world; its vocabulary is 256 words such as ka, ")
    assert says in err.splitlines()[0] and err.startswith("tuner run: warning: ")
    notes = json.loads(out)["notes"]
    assert any(note.startswith(says) for note in notes), notes  # the page shows it too
