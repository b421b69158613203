"""A token guards a server other machines reach, so `tuner serve` takes only one that is
long enough to not be guessed and has no blank in or around it (a copying mistake, or
`--token " "`), from --token or TUNER_TOKEN; the token itself is never echoed."""

from __future__ import annotations

import pytest

from tuner.cli import main
from tuner.errors import Exit
from tuner.web.gate import MIN_TOKEN, check_token
from tuner.web.local import listening_socket

RULE = f"a token is at least {MIN_TOKEN} printable ASCII characters without blanks"


@pytest.mark.parametrize("token", [" ", "", "s3cret", " " + "k" * 20, "k" * 20 + "\n",
                                   "k" * 10 + " " + "k" * 10, "k" * 15, "ключ" * 5])
def test_serve_refuses_a_short_or_blank_token(token, monkeypatch, capsys):
    with listening_socket() as taken:  # were the token taken, binding would fail instead
        port = str(taken.getsockname()[1])
        assert main(["serve", "--port", port, "--token", token]) == Exit.USAGE
        err = capsys.readouterr().err
        assert err.startswith("tuner serve: --token (or TUNER_TOKEN): ")
        assert RULE in err and f"this one has {len(token)}" in err
        monkeypatch.setenv("TUNER_TOKEN", token)
        assert main(["serve", "--port", port, "--host", "0.0.0.0"]) == Exit.USAGE
        err = capsys.readouterr().err
        assert RULE in err
    if token.strip():
        assert token.strip() not in err  # not echoed


def test_a_long_printable_token_is_taken():
    token = "Zt7-q_2kLx9wP4mA"
    assert len(token) == MIN_TOKEN and check_token(token) == token
