"""Widening bf16 expert batches into kept buffers (model.Wide), as the CPU computes them
in float32: the same bits as widening afresh, the same memory every call, grown for a
larger batch."""

from __future__ import annotations

import torch

from tuner.engine.weights.model import Weights, Wide, experts_out


def batch(k: int, seed: int) -> Weights:
    g = torch.Generator().manual_seed(seed)
    D, I = 16, 24
    return Weights((torch.randn(k, 2 * I, D, generator=g) / 4).to(torch.bfloat16),
                   (torch.randn(k, D, I, generator=g) / 4).to(torch.bfloat16))


def test_kept_buffers_give_the_bits_of_a_fresh_widening_and_are_reused():
    wide, x = Wide(), torch.randn(16, generator=torch.Generator().manual_seed(1))
    small, large = batch(2, 2), batch(5, 3)
    assert torch.equal(experts_out(x, small, wide), experts_out(x, small))
    # both held: widening afresh would give two tensors, apart in memory
    first = wide.widen(small.gate_up, small.down, torch.float32)
    again = wide.widen(small.gate_up, small.down, torch.float32)
    assert again[0].data_ptr() == first[0].data_ptr() and \
        again[1].data_ptr() == first[1].data_ptr()
    # a larger batch grows the buffers; a smaller one after it uses their first rows
    assert torch.equal(experts_out(x, large, wide), experts_out(x, large))
    grown = wide.widen(large.gate_up, large.down, torch.float32)
    assert grown[0].shape == large.gate_up.shape and grown[1].dtype == torch.float32
    assert torch.equal(experts_out(x, small, wide), experts_out(x, small))
    assert wide.widen(small.gate_up, small.down, torch.float32)[0].data_ptr() == \
        grown[0].data_ptr()  # grown held


def test_a_batch_stored_in_the_compute_dtype_is_not_copied():
    w = Weights(batch(3, 4).gate_up.float(), batch(3, 4).down.float())
    gate_up, down = w.matrices(torch.float32, Wide())
    assert gate_up is w.gate_up and down is w.down
