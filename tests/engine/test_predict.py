"""Router-consistent prediction through the real prediction code (seed 000 §2)."""

from __future__ import annotations

import torch

from tuner.engine.step.predict import PREDICTORS, predict
from tuner.knobs import BY_NAME, Config


def test_route_consistent_prediction_asks_for_fewer_missing_experts():
    z = -0.1 * torch.arange(32, dtype=torch.float32)
    resident = torch.zeros(32, dtype=torch.bool)
    resident[6:20] = True
    k = 6
    raw = predict(Config(prefetch="stale", moce_bonus=0.85), k, None, z, lambda: resident)
    route = predict(Config(prefetch="stale", moce_bonus=0.85, prefetch_route=True), k, None,
                    z, lambda: resident)

    def missing(guess: list[int]) -> set[int]:
        return {e for e in guess if not resident[e]}

    assert missing(raw) == {0, 1, 2, 3, 4, 5}
    assert missing(route) == {0, 1, 2}


def test_route_prediction_is_off_without_bonus():
    z = torch.randn(16)
    guess = predict(Config(prefetch="stale", prefetch_route=True), 4, None, z,
                    lambda: torch.ones(16, dtype=torch.bool))
    assert guess == torch.topk(z, 4).indices.tolist()


def test_unpert_off_makes_ranks_from_3_moce_aware():
    z = -0.1 * torch.arange(32, dtype=torch.float32)
    resident = torch.zeros(32, dtype=torch.bool)
    resident[6:20] = True
    guess = predict(Config(prefetch="stale", moce_bonus=0.85, prefetch_unpert=False,
                           moce_protect=1), 6, None, z, lambda: resident)
    assert guess == [0, 1, 2, 6, 7, 8]  # protect is fixed at 3 in this branch


def test_prev_predicts_the_previous_routing():
    assert predict(Config(prefetch="prev"), 4, [3, 1, 2, 0], torch.zeros(8),
                   lambda: None) == [3, 1, 2, 0]
    assert predict(Config(prefetch="prev"), 4, None, torch.zeros(8), lambda: None) == []


def test_the_prefetch_knob_offers_every_registered_predictor():
    assert BY_NAME["prefetch"].choices == ("off", *PREDICTORS)
