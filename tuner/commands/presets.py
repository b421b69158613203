"""`tuner presets`: list, show, diff, save, export and import presets offline; apply one to a
running server."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tuner.commands.args import add_knob_flags, print_json, settings_from_args
from tuner.errors import CommandError
from tuner.knobs import BY_NAME
from tuner.presets import PresetExists, Store, knob_diff
from tuner.vocabulary import inputs


def register(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", required=True)

    a = actions.add_parser("list", help="every preset, shipped and user")
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=list_presets)

    a = actions.add_parser("show", help="one preset's metadata and knobs")
    a.add_argument("name")
    a.set_defaults(func=show)

    a = actions.add_parser("diff", help="knobs that differ between two presets "
                                        "(one preset: against the defaults)")
    a.add_argument("a")
    a.add_argument("b", nargs="?")
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=diff)

    a = actions.add_parser("save", help="save the settings given by --preset and knob flags "
                                        "as a user preset")
    a.add_argument("name")
    a.add_argument("--description", help="default: none for a new preset; a replaced one "
                   "keeps its own")
    a.add_argument("--overwrite", action="store_true", help="replace a user preset of that "
                   "name (shipped presets are never replaced)")
    add_knob_flags(a)
    a.set_defaults(func=save)

    a = actions.add_parser("export", help="write a preset as STRATA_* env lines, JSON, or "
                                          "the closest llama.cpp expert-offload flags")
    a.add_argument("name")
    # Checked by the exporter, which loads the engine: a format it does not know is refused
    # naming those it does.
    a.add_argument("--format", default="env", help="env (default), json or llama.cpp")
    a.add_argument("-o", "--out", type=Path, help="file to write (default: standard output)")
    a.add_argument("--model", help="llama.cpp: the model folder whose layers and experts the "
                   "flags are for (default: the preset's model, else the demo model)")
    a.add_argument("--target", default="cuda", help="llama.cpp: the machine the flags are "
                   "for, cuda, metal or cpu, which names the GPU's buffer type in -ot (default "
                   "%(default)s)")
    a.set_defaults(func=export_preset)

    a = actions.add_parser("import", help="read an env file of STRATA_* lines as a user preset")
    a.add_argument("file", type=Path)
    a.add_argument("--name", help="preset name (default: the file's name without extension)")
    a.add_argument("--description", default="")
    a.add_argument("--overwrite", action="store_true", help="replace a user preset of that "
                   "name")
    a.set_defaults(func=import_preset)

    a = actions.add_parser("apply", help="apply a preset to a running `tuner serve`")
    a.add_argument("name")
    a.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:8765")
    a.add_argument("--token", help="the server's token, if it has one")
    a.set_defaults(func=apply)


def list_presets(args: argparse.Namespace) -> int:
    rows = Store().list()
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        where = "broken" if row["error"] else ("shipped" if row["shipped"] else "user")
        text = row["error"] or row["meta"].get("description", "")
        print(f"{row['name']:24} {where:8} {text}")
    return 0


def show(args: argparse.Namespace) -> int:
    print_json(Store().get(args.name).as_dict())
    return 0


def diff(args: argparse.Namespace) -> int:
    from tuner.format import knob_text
    from tuner.settings import defaults

    store = Store()
    b = store.get(args.b).settings() if args.b else defaults()
    rows = knob_diff(store.get(args.a).settings(), b)
    if args.json:
        print_json(rows)
        return 0
    other = args.b or "defaults"
    print(f"{'knob':20} {args.a:>16} {other:>16}")
    for row in rows:
        print(f"{row['knob']:20} {knob_text(row['a']):>16} {knob_text(row['b']):>16}")
    if not rows:
        print("(no differences)")
    return 0


def save(args: argparse.Namespace) -> int:
    store = Store()
    settings = settings_from_args(args)
    based_on = args.preset if args.preset in store.names() else None  # a name, not a path
    try:
        preset = store.save(args.name, settings, args.description, based_on, args.overwrite)
    except PresetExists as err:
        raise CommandError(f"{err} (--overwrite)") from None
    print(f"saved {preset.path}")
    return 0


def export_preset(args: argparse.Namespace) -> int:
    from tuner.presets.export import export

    text = export(Store().get(args.name), args.format, args.model, args.target)
    if args.out:
        inputs.write_atomic(args.out, lambda f: f.write(text.encode()))
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def import_preset(args: argparse.Namespace) -> int:
    from tuner.presets.export import import_env, import_file

    preset = import_file(Store(), args.file, args.name, args.description, args.overwrite)
    read = import_env(inputs.read_text(args.file, inputs.ENV_FILE), str(args.file))
    at_default = [BY_NAME[k].env for k in read if k not in preset.knobs]
    print(f"saved {preset.path}: {len(read)} knobs read, {len(preset.knobs)} kept"
          + (f"; left out at their defaults (a preset holds what differs from them): "
             f"{', '.join(at_default)}" if at_default else ""))
    return 0


def apply(args: argparse.Namespace) -> int:
    """Through the remote backend, as the terminal UI connected to a server applies one."""
    import asyncio

    from tuner.control.remote import RemoteBackend

    async def applied() -> int:
        backend = RemoteBackend(args.url, args.token, timeout=120.0)
        await backend.open()
        try:
            return (await backend.apply_preset(args.name)).version
        finally:
            await backend.close()

    version = asyncio.run(applied())
    print(f"applied {args.name}: settings version {version}")
    return 0
