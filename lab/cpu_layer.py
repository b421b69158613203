"""What lab/cpu_site.py and lab/cpu_kernels.py share: a layer of OLMoE's routed experts in
host memory (D 2048, I 1024, 64 experts in bf16, 8 a layer), the time a way of computing
one takes, and the floor: the layer's bytes at the read rate of a plain copy."""

import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

D, I, E, K = 2048, 1024, 64, 8


class Layer:
    """The weights, one token's input (float32) and the generator the layers are drawn
    from, on `threads` cores (the script's first argument, else torch's count)."""

    def __init__(self):
        self.threads = int(sys.argv[1]) if len(sys.argv) > 1 else torch.get_num_threads()
        torch.set_num_threads(self.threads)
        self.g = g = torch.Generator().manual_seed(0)
        self.gate_up = (torch.randn(E, 2 * I, D, generator=g) * 0.02).to(torch.bfloat16)
        self.down = (torch.randn(E, D, I, generator=g) * 0.02).to(torch.bfloat16)
        self.x = torch.randn(D, generator=g)
        self.expert_bytes = (self.gate_up[0].numel() + self.down[0].numel()) * 2

    def host_rows(self) -> tuple[np.ndarray, int]:
        """The experts as the engine's host copy lays them out for the CPU site's kernel:
        one row an expert, gate/up [2I, D] then down [D, I], bf16 bits as uint16 [E, row];
        and where down starts in a row, in elements."""
        gu_n = 2 * I * D
        mem = torch.empty(E, gu_n + D * I, dtype=torch.bfloat16)
        mem[:, :gu_n] = self.gate_up.reshape(E, -1)
        mem[:, gu_n:] = self.down.reshape(E, -1)
        return mem.view(torch.int16).numpy().view(np.uint16), gu_n

    def exact(self, sel: list[int]) -> torch.Tensor:
        """The experts `sel` in float32 on the input as the CPU site receives it (rounded to
        bf16): what a kernel's outputs are measured against [len(sel), D]."""
        x32 = self.x.to(torch.bfloat16).float()
        outs = []
        for e in sel:
            h = F.linear(x32, self.gate_up[e].float())
            outs.append(F.linear(F.silu(h[:I]) * h[I:], self.down[e].float()))
        return torch.stack(outs)

    def ms(self, fn, reps: int = 24) -> float:
        """ms a layer of `fn` (a list of K expert ids -> outputs), each layer other experts
        (so no cache holds them), after one untimed layer."""
        sels = [torch.randperm(E, generator=self.g)[:K].tolist() for _ in range(reps)]
        fn(sels[0])
        t0 = time.perf_counter()
        for sel in sels:
            fn(sel)
        return 1000 * (time.perf_counter() - t0) / reps

    def floor(self) -> tuple[float, float]:
        """(GB/s a plain copy of 1 GiB reads, ms a layer's bytes take at that rate)."""
        src = torch.empty(1 << 30, dtype=torch.uint8).fill_(1)
        dst = torch.empty_like(src)
        dst.copy_(src)
        t0 = time.perf_counter()
        for _ in range(4):
            dst.copy_(src)
        read_gbps = 4 * src.numel() / (time.perf_counter() - t0) / 1e9
        return read_gbps, 1000 * K * self.expert_bytes / (read_gbps * 1e9)
