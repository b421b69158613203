"""`tuner tui`: the terminal UI, over an engine in this process or a running server."""

from __future__ import annotations

import argparse

from tuner.commands.args import add_knob_flags, engine_settings, given_knobs
from tuner.errors import CommandError, Exit
from tuner.knobs import knob_flag
from tuner.ui import DEFAULT_REFRESH_HZ, MAX_REFRESH_HZ


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--connect", metavar="URL",
                   help="attach to the server at URL (such as http://127.0.0.1:8765) instead "
                        "of running an engine here; knob flags do not apply then")
    p.add_argument("--token", help="the server's access token (sent as a Bearer token)")
    p.add_argument("--refresh-hz", type=_hz, default=DEFAULT_REFRESH_HZ,
                   help="screen repaints per second, whatever the snapshot rate (default "
                        f"{DEFAULT_REFRESH_HZ:g})")
    p.add_argument("--rate", type=float,
                   help="snapshots per second asked of the server with --connect (default: "
                        "the repaint rate; more only makes the server encode snapshots "
                        "that are never drawn)")
    add_knob_flags(p)
    p.set_defaults(func=main)


def _hz(text: str) -> float:
    try:
        hz = float(text)
    except ValueError:
        hz = 0.0
    if not 0 < hz <= MAX_REFRESH_HZ:
        raise argparse.ArgumentTypeError(f"--refresh-hz wants a number in (0, "
                                         f"{MAX_REFRESH_HZ:g}], got {text!r}")
    return hz


def main(args: argparse.Namespace) -> int:
    if args.connect:
        return _connected(args)
    return _embedded(args)


def _connected(args: argparse.Namespace) -> int:
    given = [knob_flag(name) for name in given_knobs(args)]
    if args.preset:
        given.insert(0, "--preset")
    if given:
        raise CommandError(f"{', '.join(given)} set up a local engine; with --connect "
                         "change settings in the UI or with the server's API")
    from tuner.control.remote import RemoteBackend
    from tuner.ui.app import create_app

    rate = args.rate or args.refresh_hz
    app = create_app(RemoteBackend(args.connect, token=args.token, rate=rate),
                     refresh_hz=args.refresh_hz)
    return _run(app)


def _embedded(args: argparse.Namespace) -> int:
    settings = engine_settings(args)  # checked before torch loads
    from tuner.control.compose import open_controller
    from tuner.control.embedded import EmbeddedBackend
    from tuner.ui.app import create_app

    controller = open_controller(settings)
    try:
        return _run(create_app(EmbeddedBackend(controller), refresh_hz=args.refresh_hz))
    finally:
        controller.close()


def _run(app) -> int:
    app.run()
    if app.interrupted:  # by SIGTERM: the command ends as Ctrl-C ends it
        raise KeyboardInterrupt
    if app.failed:
        raise app.failed
    return Exit.BUG if app.return_code else Exit.OK  # Textual printed the traceback
