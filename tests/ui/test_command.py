"""`tuner tui` on the command line."""

from __future__ import annotations

import pytest

from tuner.cli import build_parser


def test_tui_is_a_subcommand_with_knob_flags():
    args = build_parser().parse_args(["tui", "--moce-bonus", "0.85", "--refresh-hz", "2"])
    assert args.command == "tui" and args.knob_moce_bonus == "0.85" and args.refresh_hz == 2


def test_connect_refuses_flags_that_set_up_a_local_engine(refuses):
    refuses(["tui", "--connect", "http://127.0.0.1:1", "--preset", "2q",
              "--moce-bonus", "1"], "--preset, --moce-bonus")


def test_refresh_rate_is_checked(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["tui", "--refresh-hz", "0"])
    assert "--refresh-hz wants a number in (0, 30]" in capsys.readouterr().err
