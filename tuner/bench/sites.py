"""The three execution sites: ms per token over pcie_frac beside the site-bound prediction."""

from __future__ import annotations

import statistics
from dataclasses import replace

from tuner.bench.limits import cpu_expert_gbps, pinned_copy_gbps
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.session.opening import model_folder, pick_device
from tuner.engine.session.session import Session
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.vocabulary.snapshot import Snapshot


def one_run(cfg: Config, tokens: int) -> Snapshot:
    """Warm-up with the adaptive tier filling the arena, then the measured tokens with the
    tier frozen, so the link carries only the share (seed 002's static tiers)."""
    session = Session(replace(cfg, adapt_every=cfg.adapt_every or 16))
    try:
        session.run(tokens // 2)
        session.submit(replace(cfg, adapt_every=0))
        session.reset_counters()
        session.run(tokens)
        return session.snapshot()
    finally:
        session.engine.close()


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    """The prediction is, per layer, max(T_link, T_cpu) from the experts each site served
    over the whole run. That lets the sites overlap across tokens, so it is a lower bound:
    at decode a layer has only a few misses, and a token-layer that sends one expert over a
    slow link waits for all of it. With emulated link and CPU bandwidths they are scaled by
    `opts.scale`, so that the emulated sites, not this machine's own compute, set the pace;
    without, the sites run at real speed and the prediction uses the limits measured here
    (pinned copy, CPU expert rate). The sweep over `opts.fracs` runs forwards, then
    backwards, so drift falls on every point alike."""
    fracs = list(opts.fracs)
    ckpt = Checkpoint(model_folder(cfg))
    emulated = bool(cfg.link_gbps and cfg.cpu_gbps)
    scale: float | None = opts.scale
    cpu_way = None  # measured only with the real sites
    if emulated:
        link, cpu = cfg.link_gbps * opts.scale, cfg.cpu_gbps * opts.scale
    else:
        device = pick_device(cfg.device)
        link = pinned_copy_gbps(device)
        cpu, cpu_way = cpu_expert_gbps(ckpt, beside_gpu=device.type == "cuda")
        scale = None
    runs: dict[float, list[Snapshot]] = {f: [] for f in fracs}
    for frac in fracs + fracs[::-1]:
        runs[frac].append(one_run(replace(cfg, cpu_pool=True, pcie_frac=frac,
                                          link_gbps=link if emulated else 0.0,
                                          cpu_gbps=cpu if emulated else 0.0), tokens))
    rows = []
    for frac, snaps in runs.items():
        snap = snaps[0]  # counts are deterministic: the same in both runs
        nbytes = snap["model"]["expert_bytes"]
        # the link also carries the adaptive tier's swaps, if it was left running
        bound = sum(max((r["link_experts"] + r["tier_swaps"]) * nbytes / (link * 1e9),
                        r["cpu_experts"] * nbytes / (cpu * 1e9)) for r in snap["layers"])
        t = snap["totals"]
        ms = [s["totals"]["ms_per_token"] for s in snaps]
        rows.append({"pcie_frac": frac, "ms_per_token": round(statistics.mean(ms), 3),
                     "runs": ms, "predicted_ms_per_token": round(1000 * bound / t["tokens"], 3),
                     "cpu_fraction": t["cpu_fraction"], "hit_rate": t["hit_rate"]})
    best = min(rows, key=lambda r: r["ms_per_token"])
    return {"link_gbps": link, "cpu_gbps": cpu, "cpu_way": cpu_way, "emulated": emulated,
            "scale": scale,
            "tier": "fills the arena during the warm-up, then frozen",
            "balance_point": round(link / (link + cpu), 4),
            "measured_best_frac": best["pcie_frac"],
            "predicted_best_frac": min(rows, key=lambda r: r["predicted_ms_per_token"])[
                "pcie_frac"], "tokens": tokens, "rows": rows}


def text(s: dict) -> str:
    way = f" ({s['cpu_way']})" if s["cpu_way"] else ""
    lines = [f"sites: link {s['link_gbps']} GB/s, CPU {s['cpu_gbps']} GB/s{way} (scale "
             f"{s['scale']}), balance point {s['balance_point']}; best pcie_frac measured "
             f"{s['measured_best_frac']}, predicted {s['predicted_best_frac']}",
             f"{'pcie_frac':>9} {'ms/token':>9} {'predicted':>9} {'cpu %':>6}"]
    lines += [f"{r['pcie_frac']:>9} {r['ms_per_token']:>9} {r['predicted_ms_per_token']:>9} "
              f"{r['cpu_fraction']:>6}" for r in s["rows"]]
    return "\n".join(lines)
