"""The moce router against an independent double-precision reference (seed 000 §2)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tuner.engine.weights import router


def reference(z: np.ndarray, resident: np.ndarray, k: int, protect: int, bonus: float,
              r1: float) -> list[int]:
    """Pick by pick, as seed 000 states it: rank 0 raw, ranks 1..protect-1 with the r1
    bonus, later ranks with the main bonus; argmax over the not yet selected."""
    z = z.astype(np.float64)
    chosen: list[int] = []
    for rank in range(k):
        if rank < min(protect, 1):
            b = 0.0
        elif rank < protect:
            b = r1
        else:
            b = bonus
        score = z + b * resident
        score[chosen] = -np.inf
        chosen.append(int(np.argmax(score)))
    return chosen


@pytest.mark.parametrize("r1", [0.0, 0.4])
@pytest.mark.parametrize("protect", range(9))
def test_moce_matches_reference(protect, r1):
    rng = np.random.default_rng(protect * 10 + int(r1 * 10))
    k, E = 8, 64
    for _ in range(250):
        z = rng.normal(size=E).astype(np.float32)
        resident = rng.random(E) < 0.3
        bonus = float(rng.uniform(0, 2))
        got = router.select(torch.from_numpy(z), torch.from_numpy(resident), k, protect,
                            bonus, r1).tolist()
        assert got == reference(z, resident.astype(np.float64), k, protect, bonus, r1)


def test_zero_bonus_is_exact_top_k():
    z = torch.randn(64, generator=torch.Generator().manual_seed(3))
    resident = torch.rand(64, generator=torch.Generator().manual_seed(4)) < 0.5
    exact = torch.topk(z, 6).indices
    assert torch.equal(router.select(z, resident, 6, 3, 0.0, 0.0), exact)
    assert torch.equal(router.select(z, None, 6, 3, 0.85, 0.0), exact)


def test_weights_come_from_unboosted_logits():
    z = torch.tensor([3.0, 2.0, 1.0, 0.0])
    sel = torch.tensor([0, 3])
    w = router.weights(z, sel)
    assert torch.allclose(w, torch.tensor([3.0, 0.0]).softmax(-1))
    assert torch.allclose(router.weights(z, sel, normalise=False), z.softmax(-1)[sel])


def test_seed000_constructed_case():
    """z_e = -0.1 e, residents 6..19, k 6, protect 3, bonus 0.85 -> {0,1,2,6,7,8}."""
    z = -0.1 * torch.arange(32, dtype=torch.float32)
    resident = torch.zeros(32, dtype=torch.bool)
    resident[6:20] = True
    assert router.select(z, resident, 6, 3, 0.85, 0.0).tolist() == [0, 1, 2, 6, 7, 8]
