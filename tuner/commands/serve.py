"""`tuner serve`: one engine session behind the REST API, the websocket stream and the page."""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket

from tuner.commands.args import add_knob_flags, engine_settings

DEFAULT_PORT = 8765


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; any other needs --token)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
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
            raise SystemExit(f"tuner serve: --token (or TUNER_TOKEN): {err}") from None
    if not is_loopback(args.host) and not args.token:
        raise SystemExit(f"tuner serve: --host {args.host} is reachable from other machines; "
                         "give --token T (or set TUNER_TOKEN) so every call must carry it, "
                         "or bind 127.0.0.1")
    # Heavy imports after the argument checks, so mistakes are reported at once.
    import uvicorn

    from tuner.control.controller import Controller
    from tuner.engine.session import Session
    from tuner.presets import Store
    from tuner.settings import to_config
    from tuner.web.app import create_app
    from tuner.web.local import server_config

    settings = engine_settings(args)
    # Bound before the engine starts: a port in use fails at once, and the URL printed
    # below already accepts connections.
    ipv6 = ":" in args.host
    try:
        sock = socket.create_server((args.host, args.port),
                                    family=socket.AF_INET6 if ipv6 else socket.AF_INET)
    except OSError as err:
        raise SystemExit(f"tuner serve: cannot listen on {args.host}:{args.port}: {err}") \
            from None
    try:
        session = Session(to_config(settings))
    except BaseException:
        sock.close()
        raise  # a bad model folder: cli reports its one line
    session.start()
    store = Store()
    store.clean()
    controller = Controller(session, settings, store)
    try:
        app = create_app(controller, args.token, allowed_hosts=tuple(args.allowed_host))
        host = f"[{args.host}]" if ipv6 else args.host
        print(f"tuner: serving {session.ckpt.name} at http://{host}:{args.port}/"
              + (" (token required)" if args.token else ""), flush=True)
        server = uvicorn.Server(server_config(app))
        server.run(sockets=[sock])
    finally:
        controller.close()
        sock.close()
    # uvicorn stops on SIGINT or SIGTERM and raises the signal again once it is done, which
    # may or may not reach this thread as KeyboardInterrupt (it races with asyncio's own
    # SIGINT handler); stopped either way, the command was interrupted.
    if server.started:
        raise KeyboardInterrupt
    return 1
