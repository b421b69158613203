"""`tuner bench`: ratios of what the engine achieves to what this machine allows."""

from __future__ import annotations

import argparse

from tuner.commands.args import add_knob_flags, engine_settings, print_json
from tuner.engine.model_config import ModelError

SECTIONS = ("read", "machinery", "telemetry", "link", "limit", "quant", "sites", "peer", "ui",
            "prefill")


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", default="read,machinery,telemetry,link,limit",
                   help=f"comma-separated sections of {', '.join(SECTIONS)} (default "
                        "read,machinery,telemetry,link,limit; link needs a GPU; quant compares "
                        "the model with its int4 copy (made once into the model cache); "
                        "sites emulates the link_gbps and cpu_gbps of a preset such as "
                        "seed002-x4, or runs the real sites when both are 0; peer needs "
                        "transformers and accelerate; ui runs the terminal UI, embedded and "
                        "connected, against none)")
    p.add_argument("--tokens", type=int,
                   help="tokens per measurement (default 64; for ui, 160 a phase)")
    p.add_argument("--fracs", default="0,0.1,0.171,0.25,0.4,0.6,0.8,1",
                   help="pcie_frac values of the sites sweep")
    p.add_argument("--scale", type=float, default=0.1,
                   help="multiplies the emulated link and CPU bandwidths of the sites sweep")
    p.add_argument("--rounds", type=int, default=4,
                   help="rounds of no UI / embedded / connected phases of the ui section "
                        "(default 4)")
    p.add_argument("--json", action="store_true")
    add_knob_flags(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from tuner.measure import bench
    from tuner.settings import to_config

    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise SystemExit(f"tuner bench: unknown section(s) {sorted(unknown)}; "
                         f"allowed: {', '.join(SECTIONS)}")
    settings = engine_settings(args)
    cfg = to_config(settings)
    if args.tokens is not None and args.tokens < 1:
        raise SystemExit(f"tuner bench: --tokens must be >= 1, got {args.tokens}")
    tokens = args.tokens or 64
    out = {"machine": bench.describe(cfg)}
    if "read" in sections:
        out["read"] = bench.read_bandwidth(cfg, tokens)
    if "machinery" in sections:
        out["machinery"] = bench.machinery(cfg, tokens)
    if "telemetry" in sections:
        from tuner.measure.telemetry import telemetry

        out["telemetry"] = telemetry(cfg)
    if "link" in sections:
        out["link"] = bench.link_bandwidth(cfg, tokens)
    if "limit" in sections:
        out["limit"] = bench.limit(cfg, tokens)
    if "quant" in sections:
        out["quant"] = bench.quantized(cfg, tokens)
    if "peer" in sections:
        out["peer"] = bench.peer(cfg, tokens)
    if "prefill" in sections:
        out["prefill"] = bench.prefill(cfg)
    if "sites" in sections:
        fracs = [float(f) for f in args.fracs.split(",")]
        out["sites"] = bench.sites_sweep(cfg, fracs, tokens, args.scale)
    if "ui" in sections:
        from tuner.ui.bench import measure_ui_overhead

        try:
            out["ui"] = measure_ui_overhead(settings, tokens=args.tokens or 160,
                                            rounds=args.rounds)
        except ModelError:
            raise  # cli reports it
        except ValueError as err:
            raise SystemExit(f"tuner bench: --tokens/--rounds: {err}") from None
    if args.json:
        print_json(out)
    else:
        _print(out)
    return 0


def _print(out: dict) -> None:
    m = out["machine"]
    print(f"{m['model']}: {m['layers']} layers x {m['experts']} experts, top-{m['top_k']}, "
          f"{m['expert_bytes']} bytes per expert, arena {m['arena_slots']} slots")
    if "read" in out:
        r = out["read"]
        print(f"(a) read: engine {r['engine_gbps']} GB/s while serving misses / store "
              f"{r['raw_gbps']} GB/s raw (O_DIRECT) = {r['ratio']}")
    if "machinery" in out:
        r = out["machinery"]
        print(f"(b) machinery: arena, every lookup a hit ({r['hit_rate']} %), "
              f"{r['arena_ms_per_token']} ms/token / fully resident "
              f"{r['resident_ms_per_token']} ms/token = {r['ratio']}")
    if "telemetry" in out:
        r = out["telemetry"]
        print(f"(c) telemetry: {r['tok_s_with']} tok/s with {r['clients']} websocket clients "
              f"at {r['rate']}/s / {r['tok_s_without']} tok/s without = {r['ratio']} "
              f"({r['updates_per_client_s']} updates per client a second, "
              f"{len(r['errors'])} errors); the clients cost "
              f"{r['cpu_share_paused_with_clients'] - r['cpu_share_paused']:.1f} % of a core "
              "with the engine paused")
    if "link" in out:
        r = out["link"]
        print(f"(d) link: {r['skipped']}" if "skipped" in r else
              f"(d) link: engine uploads {r['engine_h2d_gbps']} GB/s / pinned copy "
              f"{r['pinned_copy_gbps']} GB/s = {r['ratio']} on {r['device']}")
    if "limit" in out:
        r = out["limit"]
        print(f"(e) limit: {r['skipped']}" if "skipped" in r else
              f"(e) limit: engine {r['engine_ms_per_token']} ms/token / physical floor "
              f"{r['floor_ms_per_token']} ms/token = {r['ratio']} ({r['active_bytes_per_token']}"
              f" active bytes over {r['hbm_gbps']} GB/s {r['hbm_ms']} + "
              f"{r['miss_bytes_per_token']} miss bytes over "
              f"{r['transfer_gbps']} GB/s "
              f"{r['transfer_ms']}; hit rate {r['hit_rate']} %); against the same products "
              f"at full speed ({r['compute_ms']} ms) {r['compute_ratio']}; against the "
              f"engine's own dense part and expert compute {r['current_ratio']}")
    if "quant" in out:
        r = out["quant"]
        q = r.get("quality", {})
        print(f"(f) quant: {r['skipped']}" if "skipped" in r else
              f"(f) quant: {r['source_bytes_per_token']} bytes/token / int{r['bits']} "
              f"(group {r['group']}) {r['bytes_per_token']} = {r['ratio']}; ms/token "
              f"{r['source_ms_per_token']} -> {r['ms_per_token']}; mean KL {q['mean_kl']}, "
              f"top-1 agreement {q['top1_agreement_pct']} %")
    if "prefill" in out:
        r = out["prefill"]
        print(f"(g) prefill: a {r['prompt_tokens']}-token prompt token by token "
              f"{r['per_token_ms_per_token']} ms/token / batched {r['batched_ms_per_token']} "
              f"ms/token = {r['speedup']} (time to first token {r['per_token_ttft_ms']} -> "
              f"{r['batched_ttft_ms']} ms; cold arena, median of {r['rounds']})")
    if "peer" in out:
        r = out["peer"]
        print(f"peer: {r['skipped']}" if "skipped" in r else
              f"peer ({r['device']}, {r['dtype']}): engine {r['engine_ms_per_token']} "
              f"ms/token; fully resident {r['resident_ms_per_token']} vs transformers "
              f"{r['hf_ms_per_token']} = {r['resident_vs_hf']}; transformers + accelerate "
              f"offload at {r['budget_bytes']} bytes {r['offload_ms_per_token']} ms/token "
              f"= {r['engine_vs_offload']}x the engine's time; first different token "
              f"{r['first_difference']} ({r['peer']})")
    if "ui" in out:
        from tuner.ui.bench import lines

        print("ui: " + "\n    ".join(lines(out["ui"])))
    if "sites" in out:
        s = out["sites"]
        print(f"sites: link {s['link_gbps']} GB/s, CPU {s['cpu_gbps']} GB/s (scale "
              f"{s['scale']}), balance point {s['balance_point']}; best pcie_frac measured "
              f"{s['measured_best_frac']}, predicted {s['predicted_best_frac']}")
        print(f"{'pcie_frac':>9} {'ms/token':>9} {'predicted':>9} {'cpu %':>6}")
        for r in s["rows"]:
            print(f"{r['pcie_frac']:>9} {r['ms_per_token']:>9} "
                  f"{r['predicted_ms_per_token']:>9} {r['cpu_fraction']:>6}")
