"""Where between torch's start and the staging ring an engine reading through KvikIO
crashes: `python kvikio_stages.py [skip...]` takes the engine's steps in order (a small
pinned tensor, the checkpoint, the dense layers on the GPU, the KvikIO reader as the
settings build it, the arena's rows, the staging ring's pinned buffer), printing each, and
leaves out the ones named (decoder, reader, rows). `gc` collects garbage after each stage
(a crash inside the collection points at a finalizer); `ctx` makes torch's CUDA context
before anything else."""

import faulthandler
import gc
import sys

faulthandler.enable()
skip = set(sys.argv[1:])

import torch  # noqa: E402

from tuner.config import Config  # noqa: E402
from tuner.engine.memory.store import open_reads  # noqa: E402
from tuner.engine.session.opening import model_folder  # noqa: E402
from tuner.engine.weights.checkpoint import Checkpoint  # noqa: E402
from tuner.engine.weights.model import Decoder, compute_dtype  # noqa: E402


def said(stage: str) -> None:
    print(f"{' '.join(sorted(skip)) or 'all'}: {stage}", flush=True)
    if "gc" in skip:
        print(f"  collected {gc.collect()}", flush=True)


cfg = Config(io_reader="kvikio")
device = torch.device("cuda")
if "ctx" in skip:
    torch.zeros(1, device=device)
    said("context")
small = torch.zeros(8, dtype=torch.int64, pin_memory=True)
said("small pinned")
ckpt = Checkpoint(model_folder(cfg))
row_bytes = ckpt.row_bytes
said(f"checkpoint (row {row_bytes} bytes)")
if "decoder" not in skip:
    dec = Decoder(ckpt.config, ckpt.dense(), cfg.context, device,
                  compute_dtype(ckpt.dtype, device))
    said("decoder on the GPU")
if "reader" not in skip:
    pool = open_reads(cfg, device)
    said(f"reader {type(pool).__name__}, {cfg.io_workers} workers")
if "rows" not in skip:
    mem = torch.zeros(64, row_bytes, dtype=torch.uint8, device=device)
    said("arena rows")
ring = torch.zeros(16, row_bytes, dtype=torch.uint8, pin_memory=True)
said("ring pinned")
print("ok", flush=True)
