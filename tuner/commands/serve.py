"""`tuner serve`: one engine session behind the REST API, the websocket stream and the page."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import socket
import sys
from typing import TYPE_CHECKING

from tuner.commands.args import add_knob_flags, make_demo_model, settings_from_args
from tuner.errors import CommandError, Exit

if TYPE_CHECKING:
    from tuner.settings import Settings

DEFAULT_PORT = 8765
# On SIGTERM or Ctrl-C, once requests and websockets had their grace (tuner.web.local), the
# decode thread gets this long to reach a token boundary; a longer token (a prompt's
# prefill on a loaded machine, a stuck disk) is not waited for: the process ends anyway.
ENGINE_STOP_S = 2.0


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; any other needs --token)")
    p.add_argument("--port", type=port, default=DEFAULT_PORT,
                   help=f"0 to 65535; 0 takes a free one, printed (default {DEFAULT_PORT})")
    p.add_argument("--token", default=os.environ.get("TUNER_TOKEN"),
                   help="required on every call as 'Authorization: Bearer T' or ?token=T; at "
                        "least 16 printable characters, no blanks (default: $TUNER_TOKEN)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME[:PORT]",
                   type=allowed_host,
                   help="another name requests may use for this server (a DNS name, or a "
                        "reverse proxy's name); repeatable. Requests naming any host but "
                        "the bound address (and localhost on loopback) are refused")
    add_knob_flags(p)
    p.set_defaults(func=main)


def port(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 0 to 65535 (0: a free "
                                         f"one), got {text!r}")
    return number


def allowed_host(text: str) -> tuple[str, int | None]:
    from tuner.web.gate import parse_allowed_host

    try:
        return parse_allowed_host(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def main(args: argparse.Namespace) -> int:
    from tuner.web.gate import check_token

    if args.token is not None:
        try:
            check_token(args.token)
        except ValueError as err:
            raise CommandError(f"--token (or TUNER_TOKEN): {err}") from None
    if not is_loopback(args.host) and not args.token:
        raise CommandError(f"--host {args.host} is reachable from other machines; give "
                           "--token T (or set TUNER_TOKEN) so every call must carry it, or "
                           "bind 127.0.0.1")
    settings = settings_from_args(args)
    # Bound before the model loads: a port in use fails at once, and the URL printed below
    # already accepts connections.
    sock = listen(args.host, args.port)
    try:
        return serve(args, settings, sock)
    finally:
        sock.close()


def listen(host: str, port: int) -> socket.socket:
    try:
        return socket.create_server((host, port),
                                    family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as err:
        hint = ("another program (a `tuner serve`?) listens there; give another --port"
                if err.errno == errno.EADDRINUSE else "give another --host or --port")
        reason = os.strerror(err.errno) if err.errno else str(err)
        raise CommandError(f"cannot listen on {host}:{port}: {reason}; {hint}",
                           Exit.UNAVAILABLE) from None


def serve(args: argparse.Namespace, settings: Settings, sock: socket.socket) -> int:
    make_demo_model(args.command, settings)
    import uvicorn

    from tuner.control.compose import open_controller
    from tuner.web.app import create_app
    from tuner.web.local import server_config

    controller = open_controller(settings)
    try:
        app = create_app(controller, args.token, allowed_hosts=tuple(args.allowed_host))
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"tuner: serving {controller.session.ckpt.name} at http://{host}:{sock.getsockname()[1]}/"
              + (" (token required)" if args.token else ""), flush=True)
        server = uvicorn.Server(server_config(app))
        server.run(sockets=[sock])
    finally:
        if not controller.close(ENGINE_STOP_S):
            print(f"tuner serve: the engine was still inside a token after {ENGINE_STOP_S:g} "
                  "s; ending without it", file=sys.stderr)
    # uvicorn stops on SIGINT or SIGTERM and raises the signal again once it is done, which
    # may or may not reach this thread as KeyboardInterrupt (it races with asyncio's own
    # SIGINT handler); stopped either way, the command was interrupted.
    if server.started:
        raise KeyboardInterrupt
    raise CommandError("the server did not start (its log above says why)", Exit.UNAVAILABLE)
