"""Gathering bf16 experts widened into kept buffers (model.Wide), as the CPU computes them
in float32: the bits of a fresh widening, the same memory every call, grown for a larger
batch; and the arena's gather the same batch widened or gathered as bytes."""

from __future__ import annotations

import torch

from tuner.engine.memory.experts import Experts
from tuner.engine.weights.checkpoint import Checkpoint
from tuner.engine.weights.model import Weights, Wide, by_row, experts_out


def stored(n: int, seed: int) -> Weights:
    g = torch.Generator().manual_seed(seed)
    D, I = 16, 24
    return Weights((torch.randn(n, 2 * I, D, generator=g) / 4).to(torch.bfloat16),
                   (torch.randn(n, D, I, generator=g) / 4).to(torch.bfloat16))


def test_kept_buffers_give_the_bits_of_a_fresh_widening_and_are_reused():
    wide, x, rows = Wide(), torch.randn(16, generator=torch.Generator().manual_seed(1)), \
        stored(6, 2)
    each = by_row(rows)

    def fresh(ids: list[int]) -> torch.Tensor:
        return experts_out(x, Weights(rows.gate_up[ids], rows.down[ids]))

    small = wide.gather([each[4], each[1]], torch.float32)
    assert torch.equal(experts_out(x, small), fresh([4, 1]))
    again = wide.gather([each[0], each[5]], torch.float32)  # both held
    assert again.gate_up.data_ptr() == small.gate_up.data_ptr()
    assert again.down.data_ptr() == small.down.data_ptr()
    # a larger batch grows the buffers; a smaller one after it uses their first rows
    large = wide.gather([each[i] for i in (5, 3, 2, 0)], torch.float32)
    assert torch.equal(experts_out(x, large), fresh([5, 3, 2, 0]))
    assert large.gate_up.dtype == torch.float32 and large.gate_up.shape[0] == 4
    last = wide.gather([each[3]], torch.float32)
    assert last.gate_up.data_ptr() == large.gate_up.data_ptr()
    assert torch.equal(experts_out(x, last), fresh([3]))


def test_the_arena_widens_the_batch_it_would_gather_as_bytes(bf16_model):
    ckpt = Checkpoint(bf16_model)
    mem = torch.zeros(4, ckpt.row_bytes, dtype=torch.uint8)
    far = torch.zeros(8, ckpt.row_bytes, dtype=torch.uint8)
    g = torch.Generator().manual_seed(5)
    for t in (mem, far):  # bf16 bytes of small random weights: no NaN, no infinity
        t.view(torch.bfloat16).copy_(torch.randn(t.view(torch.bfloat16).shape, generator=g))
    experts = Experts(mem, ckpt.layout, ckpt.config.top_k, far=far)
    rows, far_rows = torch.tensor([2, -1]), torch.tensor([9, 6])
    narrow = experts.gather(rows, far_rows)
    wide = experts.gather(rows, far_rows, torch.float32)
    assert wide.gate_up.dtype == torch.float32
    assert torch.equal(wide.gate_up, narrow.gate_up.float())
    assert torch.equal(wide.down, narrow.down.float())
    x = torch.randn(ckpt.config.hidden_size, generator=g)
    assert torch.equal(experts_out(x, wide), experts_out(x, narrow))


def test_buffers_first_made_in_inference_mode_are_written_outside_it():
    wide, rows = Wide(), stored(3, 6)
    each = by_row(rows)
    with torch.inference_mode():
        wide.gather([each[0], each[2]], torch.float32)
    assert torch.equal(wide.gather([each[1]], torch.float32).gate_up[0],
                       rows.gate_up[1].float())
