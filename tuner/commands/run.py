"""`tuner run`: decode N tokens headless and print what the engine measured."""

from __future__ import annotations

import argparse
import sys

from tuner.commands.args import add_knob_flags, engine_settings, int_list, print_json, progress
from tuner.errors import CommandError, Exit


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokens", type=int, default=128, help="tokens to decode (default 128)")
    p.add_argument("--json", action="store_true", help="print the whole snapshot as JSON")
    prompt = p.add_mutually_exclusive_group()
    prompt.add_argument("--prompt-ids", type=int_list("prompt ids", 0),
                        help="comma-separated prompt token ids (default: the built-in corpus)")
    prompt.add_argument("--prompt", help="prompt text (the model needs a tokenizer.json)")
    add_knob_flags(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.tokens < 1:
        raise CommandError("--tokens must be at least 1")
    settings = engine_settings(args)  # checked before torch loads
    from tuner.control.compose import open_session
    from tuner.engine.session.opening import unknown_words_note

    session = open_session(settings, prompt_ids=args.prompt_ids, prompt=args.prompt)
    if session.unknown_words:
        print(f"tuner run: warning: {unknown_words_note(session.tokenizer, session.unknown_words)}",
              file=sys.stderr)
    vocab = session.ckpt.config.vocab_size
    if args.prompt_ids and max(args.prompt_ids) >= vocab:
        session.engine.close()
        raise CommandError(f"--prompt-ids must be < {vocab} (the model's vocabulary)")
    stopped = False
    try:
        try:
            with progress(f"decoding {args.tokens} tokens", args.tokens,
                          poll=lambda: session.tokens):
                session.run(args.tokens)
        except KeyboardInterrupt:  # what was decoded so far is reported
            stopped = True
        snap = session.snapshot()
    finally:
        session.engine.close()
    snap["output_ids"] = list(session.output_ids)
    if stopped:
        print(f"tuner run: interrupted after {snap['totals']['tokens']} of {args.tokens} "
              "tokens; the figures below are theirs", file=sys.stderr)
    if args.json:
        print_json(snap)
    else:
        _print(snap)
    return Exit.INTERRUPTED if stopped else Exit.OK


def _print(snap: dict) -> None:
    t = snap["totals"]
    print(f"{snap['model']['name']}: {t['tokens']} tokens, {t['ms_per_token']} ms/token, "
          f"hit rate {t['hit_rate']} %, {t['sync_misses_per_token']} sync misses/token, "
          f"{t['bytes_per_token']} bytes/token, output {snap['output_hash']}")
    pre, dec = snap["phases"]["prefill"], snap["phases"]["decode"]
    prompts = f"{pre['prompts']} prompt{'' if pre['prompts'] == 1 else 's'}"
    print(f"workload {snap['workload']['name']}: prefill {pre['tokens']} tokens of "
          f"{prompts}, {pre['ms_per_token']} ms/token, time to first token "
          f"{pre['ttft_ms']} ms; decode {dec['tokens']} tokens, {dec['ms_per_token']} ms/token")
    steady = snap["window"]["phases"]["decode"]
    print(f"steady: the last {steady['tokens']} decoded tokens at {steady['ms_per_token']} "
          f"ms/token; warm-up {t['warmup_ms']} ms before the tokens (graphs captured, "
          "kernels built; in no ms/token)")
    if t["q_tokens"]:
        print(f"quality: KL {t['quality_kl']} nats/token, top-1 agreement "
              f"{t['top1_agreement']} % over {t['q_tokens']} compared tokens; the exact "
              f"pass ({t['quality_ms']} ms each) is not in ms/token")
    if snap["text"]:
        print(f"prompt: {snap['text']['prompt']}\noutput: {snap['text']['output']}")
    for note in snap["notes"]:
        print(f"note: {note}")
