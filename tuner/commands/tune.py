"""`tuner tune`: a multi-objective Optuna search over the knob table, run as live changes
of one engine session (or one per Ray worker), every trial paired with a baseline."""

from __future__ import annotations

import argparse
import sys

from tuner.charts import plot_format
from tuner.commands.args import add_knob_flags, extra, print_json, settings_from_args
from tuner.errors import CommandError, Exit
from tuner.format import figure
from tuner.measure.rules import check_limits
from tuner.settings import SettingsError, non_default
from tuner.tune.worker import SENTINEL_EVERY
from tuner.vocabulary.judging import DEFAULT_OBJECTIVE, OBJECTIVES

DEFAULT_TRIALS, DEFAULT_TOKENS = 20, 64
OBJECTIVE_LABEL = {"ms": "ms per token", "stall": "exposed stall per token"}


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trials", type=int, default=DEFAULT_TRIALS,
                   help=f"trials to run now (default {DEFAULT_TRIALS}; 0 with --save-best "
                   "saves from a study already run)")
    p.add_argument("--tokens", type=int, default=DEFAULT_TOKENS,
                   help=f"measured tokens per trial (default {DEFAULT_TOKENS})")
    p.add_argument("--warmup", type=int, help="unmeasured tokens before each measured span, "
                   "from the same start (default: as many as --tokens)")
    p.add_argument("--objective", choices=tuple(OBJECTIVES), default=DEFAULT_OBJECTIVE,
                   help="time objective: ms per token, or exposed read stall per token "
                   "(default ms); bytes per token is the second objective")
    p.add_argument("--space", default="", help="search ranges replacing the knob table's: "
                   "knob=low:high for a number, knob=a|b for a switch or choice, separated "
                   "by commas")
    p.add_argument("--fix", default="", help="knobs pinned for every trial: knob=value,...")
    p.add_argument("--max-kl", type=float, help="quality gate of lossy trials (moce bonus, "
                   "drop_cold): mean KL(exact || served) at most this many nats per token; "
                   "with a limit the lossy knobs join the search")
    p.add_argument("--min-agreement", type=float, help="quality gate of lossy trials: top-1 "
                   "agreement with exact routing at least this percentage")
    p.add_argument("--sentinel-every", type=int, default=SENTINEL_EVERY,
                   help="measure the baseline again after this many trials of a worker "
                   f"(default {SENTINEL_EVERY})")
    p.add_argument("--storage", help="Optuna storage: a URL (sqlite:///..., "
                   "postgresql://...) or a file path (default: tune.db in TUNER_HOME)")
    p.add_argument("--study", help="study name; a study that exists is resumed, when run "
                   "with the same baseline, space, objective, span and gate (default: one "
                   "study for each of those, so the same tune resumes and another starts its "
                   "own; with --trials 0, the study run last)")
    p.add_argument("--sampler-seed", type=int, default=0, help="seed of the TPE sampler")
    p.add_argument("--save-best", metavar="NAME", help="save the fastest trial of the "
                   "Pareto front (or --trial N) as preset NAME, then A/B it against the "
                   "baseline")
    p.add_argument("--trial", type=int, help="with --save-best: the trial to save")
    p.add_argument("--overwrite", action="store_true",
                   help="with --save-best: replace a user preset of that name")
    p.add_argument("--ab-pairs", type=int, default=4, help="pairs of the closing A/B of "
                   "the saved preset against the baseline (default 4; 0 = none)")
    p.add_argument("--ab-tokens", type=int, default=128,
                   help="tokens per run of the closing A/B (default 128)")
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="run trials on Ray workers, one engine session each; without an "
                   "address a local Ray instance is started")
    p.add_argument("--workers", type=int, default=2,
                   help="Ray workers (default 2)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--plot", metavar="FILE", help="also draw the trials and the Pareto front "
                   "into FILE (.svg, .png or .pdf)")
    add_knob_flags(p)  # the baseline every trial is paired with; trials change knobs on it
    p.set_defaults(func=main)


def _check(args: argparse.Namespace) -> None:
    for name, least in (("trials", 0), ("tokens", 1), ("sentinel_every", 1), ("workers", 1),
                        ("ab_pairs", 0)):
        if getattr(args, name) < least:
            raise CommandError(f"--{name.replace('_', '-')} must be at least {least}")
    if args.warmup is not None and args.warmup < 0:
        raise CommandError("--warmup must be at least 0")
    if args.trials == 0 and not args.save_best:
        raise CommandError("--trials 0 runs nothing; add --save-best NAME to save from the "
                           "study")
    if (args.trial is not None or args.overwrite) and not args.save_best:
        raise CommandError("--trial and --overwrite go with --save-best NAME")
    if args.plot:
        plot_format(args.plot)
    check_limits(args.max_kl, args.min_agreement)
    if args.save_best and args.ab_pairs:  # the closing A/B's range, checked before a trial
        from tuner.control.models import ABSpec, parse

        try:
            parse(ABSpec, {"a": "baseline", "b": args.save_best, "pairs": args.ab_pairs,
                           "tokens": args.ab_tokens})
        except SettingsError as err:
            raise CommandError(f"the closing A/B (--ab-pairs, --ab-tokens): {err}") from None


def main(args: argparse.Namespace) -> int:
    _check(args)
    base = settings_from_args(args)  # checked before Optuna and torch load
    with extra("tune"):
        import tqdm  # noqa: F401 (the progress bar's, from the same extra)

        from tuner.tune import run, study

    out = sys.stderr if args.json else sys.stdout
    if args.trials == 0:  # save from a study already run: its own baseline and space
        url = study.storage_url(args.storage)
        result = run.summary(study.load_study(url, args.study or study.latest_study(url)),
                             url, True)
    else:
        spec = run.Spec(base=non_default(base), space=args.space, fix=args.fix,
                        objective=args.objective, tokens=args.tokens,
                        warmup=args.tokens if args.warmup is None else args.warmup,
                        sentinel_every=args.sentinel_every, max_kl=args.max_kl,
                        min_agreement=args.min_agreement)
        with Progress(args.trials) as progress:
            result = run.tune(spec, args.trials, args.storage, args.study,
                              args.sampler_seed, args.ray, args.workers,
                              on_event=progress.event)
        _print_front(result, out)
    if args.plot:
        from tuner import charts

        chart = charts.tune_chart(result["trials"], [t["number"] for t in result["front"]])
        print(f"chart written to {charts.write(chart, args.plot)}", file=out)
    if args.save_best:
        result["saved"] = _save_and_check(result, args, out)
    if args.json:
        print_json(result)
    if not result["complete"]:
        return Exit.INTERRUPTED
    return Exit.REJECTED if result.get("saved", {}).get("ab", {}).get("rejected") else Exit.OK


class Progress:
    """A progress bar on stderr: trials done, the best so far, the time left."""

    def __init__(self, trials: int):
        from tqdm import tqdm

        self.bar = tqdm(total=trials, unit="trial", file=sys.stderr, dynamic_ncols=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()

    def event(self, kind: str, r: dict, study) -> None:
        from tuner.tune.study import front

        if kind == "start":
            self.bar.set_description(f"trial {r['number']}")
            return
        best = front(study)[:1]
        best_text = f"{best[0].values[0]:+.1f} %" if best else "-"
        self.bar.set_postfix_str(f"best {best_text} vs baseline; last: {_outcome(r)}")
        self.bar.update(1)


def _outcome(r: dict) -> str:
    if r["rejected"]:
        return "rejected"
    return f"{r['score_pct']:+.1f} %, {r['bytes_per_token']} B/token"


def _changed(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "-"


def _knobs(t: dict) -> str:
    """A trial's knobs; trial 0's are the baseline's own, and say so."""
    return ("the baseline's own values: " if t["baseline_values"] else "") + _changed(t["params"])


def _print_front(r: dict, out) -> None:
    trials = r["trials"]
    done = sum(t["state"] == "complete" for t in trials)
    rejected = [t for t in trials if t["rejected"]]
    objective = r["spec"]["objective"]
    print(f"study {r['study']!r} in {r['storage']}: {len(trials)} trials, {done} passed, "
          f"{len(rejected)} rejected{'' if r['complete'] else ' (stopped early)'}", file=out)
    for t in rejected[-5:]:
        print(f"  trial {t['number']} rejected: {t['rejected']}"
              + (" (it ran the baseline's own values)" if t["baseline_values"] else ""), file=out)
    print(f"Pareto front ({OBJECTIVE_LABEL[objective]} against the paired baseline, "
          "bytes read per token):", file=out)
    print(f"{'trial':>5} {'vs base':>8} {'ms/token':>9} {'base ms':>8} {'bytes/token':>12} "
          f"{'hit %':>6} {'KL':>8}  worker / knobs", file=out)
    for t in r["front"]:
        print(f"{t['number']:>5} {t['score_pct']:>+7.1f}% {t['ms_per_token']:>9.3f} "
              f"{t['baseline_ms_per_token']:>8.3f} {t['bytes_per_token']:>12} "
              f"{t['hit_rate']:>6} {figure(t['quality_kl']):>8}  {t['worker']}: "
              f"{_knobs(t)}", file=out)


def _save_and_check(r: dict, args: argparse.Namespace, out) -> dict:
    """Saves the chosen trial as a preset, then A/Bs it against the baseline with `tuner
    ab`'s runner and prints its verdict."""
    from tuner.control.models import ABSpec
    from tuner.control.report import result_lines
    from tuner.measure.ab import arm_settings, run_ab
    from tuner.tune import study

    s = study.load_study(r["storage"], r["study"])
    preset, trial = study.save_best(s, args.save_best, args.trial, overwrite=args.overwrite)
    print(f"saved trial {trial.number} as preset {preset.name!r} ({preset.path}): "
          f"{_changed(preset.knobs)}", file=out)
    if trial.user_attrs.get("baseline_values"):
        print(f"trial {trial.number} ran the baseline's own values: no trial beat the "
              "baseline on the front, and its score is the study's noise floor", file=out)
    saved = {"preset": preset.name, "trial": trial.number, "knobs": preset.knobs}
    if not args.ab_pairs:
        return saved
    base = study.spec_base(s)
    a, b = base, arm_settings(preset.name, base)
    print(f"A/B: A = the baseline, B = preset {preset.name!r}, {args.ab_pairs} pairs of "
          f"{args.ab_tokens} tokens and a sentinel A", file=out)
    gate = s.user_attrs["spec"].get("gate") or {}
    ab = run_ab(a, b, ABSpec(a="baseline", b=preset.name, pairs=args.ab_pairs,
                             tokens=args.ab_tokens, max_kl=gate.get("max_kl"),
                             min_agreement=gate.get("min_agreement")))
    print("\n".join(result_lines(ab)), file=out)
    saved["ab"] = ab
    return saved
