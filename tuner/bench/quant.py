"""(f) What quantized experts save: the current model against its int4 copy."""

from __future__ import annotations

from dataclasses import replace

from tuner.bench.limits import ratio
from tuner.bench.sections import Options
from tuner.config import Config
from tuner.engine.session.opening import model_folder, pick_device
from tuner.engine.session.session import Session
from tuner.engine.weights import quant, synth
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.measure.quality import compare

BITS = 4


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    """The copy is made once into the model cache (groups of 64, or 32 where a matrix's
    input dimension needs it); both run at the same arena share and settings, for bytes and
    ms per token, and the copy's quality is measured against the source."""
    ckpt = Checkpoint(model_folder(cfg))
    if ckpt.quant is not None:
        return {"skipped": f"{ckpt.name} is already quantized; give a float model"}
    mc = ckpt.config
    group = 64 if mc.hidden_size % 64 == mc.expert_width % 64 == 0 else 32
    q = quant.Quant(BITS, group)
    out = synth.cache_dir() / f"{ckpt.name}-int{BITS}g{group}"
    if not (out / "config.json").is_file():
        routed = f".{ckpt.config.spec.moe}.experts."
        quant.write_quantized(ckpt.folder, out, q, lambda name: routed in name)
    runs = {}
    for name, folder in (("source", ckpt.folder), ("quantized", out)):
        session = Session(replace(cfg, model=str(folder)))
        try:
            session.run(tokens)
            runs[name] = session.snapshot()["totals"]
        finally:
            session.engine.close()
    a, b = runs["source"], runs["quantized"]
    return {"bits": BITS, "group": group, "model": str(out),
            "source_expert_bytes": ckpt.expert_bytes,
            "expert_bytes": Checkpoint(out).expert_bytes,
            "source_bytes_per_token": a["bytes_per_token"], "bytes_per_token": b["bytes_per_token"],
            "ratio": ratio(a["bytes_per_token"], b["bytes_per_token"]),
            "source_ms_per_token": a["ms_per_token"], "ms_per_token": b["ms_per_token"],
            "source_hit_rate": a["hit_rate"], "hit_rate": b["hit_rate"], "tokens": tokens,
            "quality": compare(ckpt, Checkpoint(out), pick_device(cfg.device), tokens,
                               cfg.context)}


def text(r: dict) -> str:
    q = r["quality"]
    return (f"(f) quant: {r['source_bytes_per_token']} bytes/token / int{r['bits']} "
            f"(group {r['group']}) {r['bytes_per_token']} = {r['ratio']}; ms/token "
            f"{r['source_ms_per_token']} -> {r['ms_per_token']}; mean KL {q['mean_kl']}, "
            f"top-1 agreement {q['top1_agreement_pct']} %")
