"""An A/B result as lines of text: what `tuner ab` prints and the terminal UI shows (the
result as tuner.measure.ab writes it, the `result` of an A/B's status)."""

from __future__ import annotations

from tuner.control.answers import ABResult, WorkloadResult
from tuner.format import fixed, knob_text, repeated_figure


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f} %"


def knob_change(r: ABResult) -> str:
    diff = ", ".join(f"{d['knob']} {knob_text(d['a'])} -> {knob_text(d['b'])}"
                     for d in r["knob_diff"])
    return diff or "identical settings"


def _timing_lines(r: WorkloadResult) -> list[str]:
    """Per-arm figures, each pair, the mean difference and the drift of one workload."""
    lines = []
    for arm in ("A", "B"):
        s = r["arms"][arm]
        stdev = "-" if s["stdev"] is None else f"{s['stdev']:.3f}"
        same = ("identical in every run" if s["identical"] else
                f"NOT identical across runs ({', '.join(s['differ'])} differ)")
        lines.append(f"arm {arm}: {s['mean']:.3f} ms/token mean, stdev {stdev} over "
                     f"{len(s['runs'])} runs; hit rate {repeated_figure(s['hit_rate'])} %, "
                     f"{repeated_figure(s['bytes_per_token'])} bytes/token, KL "
                     f"{repeated_figure(s['quality_kl'])} nats/token, top-1 agreement "
                     f"{repeated_figure(s['top1_agreement'], '%')} %: {same}")
    lines += [f"pair {p['pair']}: B - A = {p['diff']:+.3f} ms/token ({_pct(p['pct'])}), "
              f"{p['sign']}" for p in r["pair_diffs"]]
    lines.append(f"mean difference B - A {r['diff']:+.3f} ms/token ({_pct(r['diff_pct'])}); "
                 f"drift sentinel A - first A {r['drift']:+.3f} ms/token "
                 f"({_pct(r['drift_pct'])}); spread {r['spread']:.3f} ms/token (the largest "
                 "stdev of the arms' runs and of the pairs)")
    return lines


def phase_lines(r: WorkloadResult) -> list[str]:
    """Each arm's figures per phase on one workload (its first run; counts repeat)."""
    lines = [f"{'arm':>3} {'phase':<8} {'tokens':>6} {'ms/token':>9} {'sync/token':>10} "
             f"{'hits/token':>10} {'stall ms/token':>14}"]
    for arm in ("A", "B"):
        run = next(x for x in r["runs"] if x["arm"] == arm)
        for name, p in run["phases"].items():
            lines.append(f"{arm:>3} {name:<8} {p['tokens']:>6} {fixed(p['ms_per_token']):>9} "
                         f"{fixed(p['sync_misses_per_token']):>10} "
                         f"{fixed(p['hits_per_token']):>10} "
                         f"{fixed(p['stall_ms_per_token'], '.4f'):>14}")
    return lines


def result_lines(r: ABResult) -> list[str]:
    """The timing figures of each workload, the rules' outcomes and the verdict."""
    workloads = r.get("workloads") or [r]
    notes = [f"note: {n}" for n in r.get("notes", [])]
    if len(workloads) == 1 and not r.get("rules"):
        return _timing_lines(r) + notes + [f"verdict: {r['verdict']}"]
    lines = []
    for w in workloads:
        lines.append(f"workload {w['workload']}:")
        lines += ["  " + line for line in phase_lines(w) + _timing_lines(w)]
        lines.append(f"  timing: {w['verdict']}")
    if r.get("outcomes"):
        lines.append(f"rules {r['rules']}:")
        lines.append(f"  {'workload':<12} {'phase':<8} {'rule':<14} {'outcome':<7} reason")
        lines += [f"  {o['workload']:<12} {o['phase']:<8} {o['rule']:<14} {o['status']:<7} "
                  f"{o['reason']}" for o in r["outcomes"]]
    return lines + notes + [f"verdict: {r['verdict']}"]
