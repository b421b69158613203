"""`tuner model make|quantize|gguf|stats`: write the demo model or a real-shape one; quantize
a model's experts; write a model as GGUF for llama.cpp; measure a model's routing through
the engine."""

from __future__ import annotations

import argparse
import logging
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from tuner.commands.args import add_knob_flags, engine_settings, extra, print_json, progress
from tuner.errors import CommandError
from tuner.format import figure
from tuner.vocabulary import recipes

# The quantizer's choices, named here so that a mistake is answered before torch loads
# (tests/commands check them against tuner.engine.weights.quant's).
BITS, GROUPS = (8, 4), (32, 64, 128)


def register(p: argparse.ArgumentParser) -> None:
    msub = p.add_subparsers(dest="model_command", required=True)
    make = msub.add_parser("make", help="write the deterministic demo model or a model of a "
                                        "real MoE's shape (no download)")
    which = make.add_mutually_exclusive_group()
    which.add_argument("--tiny", action="store_true", help="the tiny test model instead")
    which.add_argument("--deep", action="store_true",
                       help="a 64-layer model of small experts instead (for the UI benchmark)")
    which.add_argument("--like", type=Path, metavar="TRACE",
                       help="a model of a routing trace's shape (layers, experts, top-k), to "
                       "drive with --routing TRACE")
    make.add_argument("--hidden-size", type=int, default=recipes.DEFAULT.hidden_size,
                      help="with --like: hidden size D (default %(default)s)")
    make.add_argument("--expert-width", type=int, default=recipes.DEFAULT.expert_width,
                      help="with --like: expert width I; an expert is 3 x D x I weights "
                      "(default %(default)s)")
    which.add_argument("--shape", choices=tuple(recipes.SHAPES),
                       help="a model with this MoE's published dimensions instead")
    make.add_argument("--layers", type=int,
                      help="with --shape: the first N layers only (to fit a disk)")
    make.add_argument("--dtype", choices=tuple(recipes.DTYPES),
                      help="weights' dtype (default bf16; the tiny test model fp32)")
    make.add_argument("--out", type=Path, help="folder (default: the model cache)")
    make.add_argument("--force", action="store_true", help="replace an existing folder")
    make.set_defaults(func=_make)
    qz = msub.add_parser("quantize", help="write a copy whose experts are group-wise int8 or "
                                          "int4, and report what that costs in output quality")
    qz.add_argument("source", type=Path, help="model folder to quantize")
    qz.add_argument("out", type=Path, help="folder to write")
    qz.add_argument("--bits", type=int, choices=BITS, default=4)
    qz.add_argument("--group", type=int, choices=GROUPS, default=64,
                    help="weights per scale, along each matrix's input dimension")
    qz.add_argument("--tokens", type=int, default=64,
                    help="greedy tokens of the quality comparison (default 64; 0 = skip it)")
    qz.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                    help="where the quality comparison runs")
    qz.add_argument("--json", action="store_true")
    qz.set_defaults(func=_quantize)
    gg = msub.add_parser("gguf", help="write a model as one GGUF file for llama.cpp "
                                      "(f32 or bf16, with its vocabulary)")
    gg.add_argument("model", help="a model folder, or demo / tiny (the made models, made "
                    "first if missing)")
    gg.add_argument("out", type=Path, help="the .gguf file to write")
    gg.add_argument("--dtype", choices=("f32", "bf16"),
                    help="the matrices' type (default: bf16 for a bfloat16 model, else f32; "
                    "vectors, norms and routers are always f32)")
    gg.add_argument("--force", action="store_true", help="replace an existing file")
    gg.set_defaults(func=_gguf)
    stats = msub.add_parser("stats", help="routing skew and predictor overlaps, measured")
    stats.add_argument("--tokens", type=int, default=512)
    stats.add_argument("--json", action="store_true")
    add_knob_flags(stats)
    stats.set_defaults(func=_stats)


def _make(args: argparse.Namespace) -> int:
    if args.layers is not None and not args.shape:
        raise CommandError("--layers needs --shape")
    if args.shape:
        recipe = recipes.shape(args.shape, args.layers, args.dtype or "bf16")
    elif args.like:
        from tuner.vocabulary import trace_format

        if min(args.hidden_size, args.expert_width) < 1:
            raise CommandError("--hidden-size and --expert-width must be >= 1")
        recipe = recipes.like(trace_format.load(args.like), args.hidden_size,
                              args.expert_width)
        recipe = replace(recipe, dtype=args.dtype or recipe.dtype)
    else:
        recipe = recipes.TINY if args.tiny else recipes.DEEP if args.deep else recipes.DEFAULT
        recipe = replace(recipe, dtype=args.dtype or recipe.dtype)
    out = args.out or recipes.default_model_path(recipe)
    if out.exists() and args.force:
        shutil.rmtree(out)
    if out.exists():
        print(f"{out} already exists (use --force to make it again)")
        return 0
    from tuner.engine.weights import synth

    with progress(f"{recipe.id}: shards") as update:
        synth.write(recipe, out, update)
    print(f"wrote {recipe.id} to {out}")
    if args.like:
        print(f"drive it with: --model {out} --routing {args.like}")
    return 0


def _quantize(args: argparse.Namespace) -> int:
    from tuner.engine.session.opening import pick_device
    from tuner.engine.weights import quant
    from tuner.engine.weights.checkpoint import Checkpoint

    try:
        source = Checkpoint(args.source)
        device = pick_device(args.device)
    except (OSError, ValueError, KeyError) as err:
        raise CommandError(str(err)) from None
    if source.quant is not None:
        raise CommandError(f"{args.source} is already quantized ({source.quant.bits} bits); "
                           "quantize a float model")
    q = quant.Quant(args.bits, args.group)
    routed = f".{source.config.spec.moe}.experts."
    is_expert: Callable[[str], bool] = lambda name: routed in name  # noqa: E731
    try:
        with progress(f"int{q.bits} g{q.group}: shards") as update:
            quant.write_quantized(source.folder, args.out, q, is_expert, update)
    except (OSError, ValueError) as err:
        raise CommandError(str(err)) from None
    out = Checkpoint(args.out)
    report = {"source": str(source.folder), "out": str(out.folder), "bits": q.bits,
              "group": q.group, "source_expert_bytes": source.expert_bytes,
              "expert_bytes": out.expert_bytes,
              "bytes_ratio": round(source.expert_bytes / out.expert_bytes, 3)}
    if args.tokens > 0:
        from tuner.measure.quality import compare

        report["quality"] = compare(source, out, device, args.tokens)
    if args.json:
        print_json(report)
        return 0
    print(f"wrote {out.name} to {out.folder}: {out.expert_bytes} bytes per expert, "
          f"{report['bytes_ratio']}x fewer than {source.expert_bytes}")
    if "quality" in report:
        r = report["quality"]
        print(f"against the source over {r['positions']} positions ({r['device']}): mean KL "
              f"{r['mean_kl']} (max {r['max_kl']}), top-1 agreement "
              f"{r['top1_agreement_pct']} %, greedy decoding the same for "
              f"{r['greedy_same_prefix']} of {r['greedy_tokens']} tokens")
    return 0


MADE = {"demo": recipes.DEFAULT, "tiny": recipes.TINY}


def _gguf(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.force:
        raise CommandError(f"{args.out} already exists (use --force to replace it)")
    with extra("gguf"):
        from tuner.llamacpp.convert import convert

    logging.getLogger("gguf").setLevel(logging.WARNING)  # its writer logs each step
    folder, recipe = Path(args.model), MADE.get(args.model)
    if recipe:
        from tuner.engine.weights import synth

        with progress(f"{recipe.id}: shards") as update:
            folder = synth.ensure(recipe, progress=update)
    with progress(f"{args.out.name}: tensors") as update:
        done = convert(folder, args.out, args.dtype, update)
    size = done.path.stat().st_size
    print(f"wrote {folder.name} ({done.arch}, {done.dtype}, written by {done.writer}) to "
          f"{done.path}: {size / 2**20:.1f} MiB")
    return 0


def _stats(args: argparse.Namespace) -> int:
    settings = engine_settings(args)  # checked before torch loads
    from tuner.control.compose import open_session
    from tuner.vocabulary.stats import routing_stats

    session = open_session(settings)
    try:
        with progress(f"decoding {args.tokens} tokens", args.tokens,
                      poll=lambda: session.tokens):
            session.run(args.tokens)
        stats = routing_stats(session)
    finally:
        session.engine.close()
    if args.json:
        print_json(stats)
        return 0
    t = stats["totals"]
    print(f"{stats['model']}: {stats['tokens']} tokens; slot overlap (whole routings) - "
          f"stale-gate {t['stale_pct']} % ({t['stale_whole_pct']} %), prev-token "
          f"{t['prev_pct']} % ({t['prev_whole_pct']} %), fresh-gate control {t['ctrl_pct']} % "
          f"({t['ctrl_whole_pct']} %); top-10 % experts take {t['top10_share']} % of routings")
    print(f"{'layer':>5} {'stale':>6} {'prev':>6} {'ctrl':>6} {'routings':>9} "
          f"{'top10%':>7} {'max/mean':>9}")
    for r in stats["layers"]:
        print(f"{r['layer']:>5} {figure(r['stale_pct'], '%'):>6} {figure(r['prev_pct'], '%'):>6} "
              f"{figure(r['ctrl_pct'], '%'):>6} {r['routings']:>9} {r['top10_share']:>7.1f} "
              f"{r['max_over_mean']:>9.2f}")
    return 0
