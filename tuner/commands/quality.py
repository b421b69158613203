"""`tuner quality`: teacher-forced perplexity of a text through the streaming engine at the
given settings, beside exact routing's, with KL, top-1 agreement, tokens/s and bytes/token;
`--sweep` repeats it over knob values and prints a table."""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

from tuner.commands.args import add_knob_flags, engine_settings, print_json
from tuner.errors import CommandError
from tuner.format import knob_text
from tuner.settings import SettingsError, apply, from_texts, to_config
from tuner.vocabulary import inputs

COLUMNS = (  # (key, heading) of the sweep's table, after the swept knobs
    ("hit_rate", "hit rate %"), ("bytes_per_token", "bytes/token"),
    ("ms_per_token", "ms/token"), ("quality_kl", "KL"), ("top1_agreement", "top-1 %"),
    ("perplexity", "perplexity"), ("exact_perplexity", "exact perplexity"),
)


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--text", type=Path, help="UTF-8 text file, encoded with the model's "
                   "tokenizer.json (default: the demo model's own sample of --tokens words)")
    p.add_argument("--tokens", type=int, default=256, help="words of the demo sample when no "
                   "--text is given (default 256)")
    p.add_argument("--sweep", action="append", default=[], metavar="KNOB=V1,V2,...",
                   help="measure at each of these values of a knob (repeat for a grid; "
                   "prints a table)")
    p.add_argument("--json", action="store_true")
    add_knob_flags(p)
    p.set_defaults(func=main)


def progress(what: str):
    """Reports a step on stderr: its line at once, then (on a terminal) positions done,
    so a minute of measuring is never silent."""
    print(f"tuner quality: {what}", file=sys.stderr, flush=True)
    tty = sys.stderr.isatty()

    def report(done: int, total: int) -> None:
        if tty:
            print(f"\r  {done}/{total} positions", end="\n" if done == total else "",
                  file=sys.stderr, flush=True)

    return report


def parse_sweep(items: list[str]) -> dict[str, list[str]]:
    grid: dict[str, list[str]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        parts = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not name.strip() or not parts:
            raise SettingsError({"sweep": f"--sweep {item!r}: expected KNOB=V1,V2,... such "
                                          "as drop_cold=0,0.1"})
        grid[name.strip().replace("-", "_")] = parts
    return grid


def main(args: argparse.Namespace) -> int:
    base = engine_settings(args)
    grid = parse_sweep(args.sweep)
    # every combination validated before the first is measured, and before torch loads
    runs = [(dict(zip(grid, combo)), to_config(apply(base, from_texts(dict(zip(grid, combo))))))
            for combo in itertools.product(*grid.values())]
    from tuner.engine.session.opening import model_folder
    from tuner.engine.weights.checkpoint import Checkpoint
    from tuner.measure.perplexity import DEMO_SEED, demo_text, evaluate

    if args.text is not None:
        try:
            text = inputs.read_text(args.text, inputs.TEXT)
        except (OSError, inputs.PathError) as err:
            raise CommandError(f"--text {err}") from None
        source = str(args.text)
    else:
        if args.tokens < 2:
            raise CommandError("--tokens must be at least 2")
        try:
            text = demo_text(Checkpoint(model_folder(base)), args.tokens,
                             progress=progress(f"sampling the text: {args.tokens} words of "
                                               "the exact model"))
        except ValueError as err:
            raise CommandError(str(err)) from None
        source = f"the model's own sample: {args.tokens} words, exact routing, seed {DEMO_SEED}"
    results = []
    for i, (knobs, cfg) in enumerate(runs, 1):
        at = ", ".join(f"{k} = {knob_text(v)}" for k, v in knobs.items()) or "the settings"
        try:
            results.append({**knobs, **evaluate(
                cfg, text, progress(f"measuring {i} of {len(runs)}: {at}"))})
        except ValueError as err:
            raise CommandError(str(err)) from None
    if args.json:
        print_json({"text": source, "runs": results})
        return 0
    r = results[0]
    print(f"{r['model']}: {r['positions']} positions of {source}")
    if r["unknown_words"]:
        print(f"warning: {r['unknown_words']} word(s) of the text are not in the model's "
              "vocabulary and were read as its unknown token", file=sys.stderr)
    if not grid:
        print(f"perplexity {r['perplexity']} (exact routing {r['exact_perplexity']}), "
              f"KL {r['quality_kl']} nats/token, top-1 agreement {r['top1_agreement']} %, "
              f"{r['tok_s']} tokens/s, {r['bytes_per_token']} bytes/token, hit rate "
              f"{r['hit_rate']} %; the exact pass ({r['quality_ms']} ms/token) is not in "
              "tokens/s")
        return 0
    print(table(list(grid), results))
    return 0


def table(knobs: list[str], results: list[dict]) -> str:
    """A markdown table: the swept knobs, then COLUMNS."""
    head = knobs + [h for _, h in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cells = [str(r[k]) for k in knobs] + [
            "-" if r[key] is None else str(r[key]) for key, _ in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
