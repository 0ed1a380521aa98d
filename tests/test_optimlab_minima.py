"""The Loss page's mountain range: several valleys, plain SGD stuck in a local minimum where
torch.optim.SGD with momentum 0.9 rolls through to the lowest point."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cifarlab import i18n
from cifarlab.lab import loss as optimlab

M = optimlab.SURFACES["mountains"]


def grad(p) -> np.ndarray:
    q = torch.tensor(p, dtype=torch.float64, requires_grad=True)
    M.fn(q[0], q[1]).backward()
    return q.grad.numpy()


def hessian_eigenvalues(p) -> np.ndarray:
    h = torch.autograd.functional.hessian(lambda q: M.fn(q[0], q[1]),
                                          torch.tensor(p, dtype=torch.float64))
    return np.linalg.eigvalsh(h.numpy())


def test_the_range_has_several_minima_and_the_lowest_is_marked():
    # every grid point is a descent start: its SGD end is a true minimum (gradient 0, curving up)
    ends = set()
    for x in np.linspace(*M.x_range, 4):
        for y in np.linspace(*M.y_range, 4):
            path = optimlab.sgd_path("mountains", (x, y), lr=0.1, steps=150)
            end = tuple(np.round(path.points[-1], 2))
            assert np.linalg.norm(grad(end)) < 1e-2 and (hessian_eigenvalues(end) > 0).all()
            ends.add(end)
    assert len(ends) >= 5                                   # a range, not a bowl
    losses = {e: float(M.fn(torch.tensor(e[0]), torch.tensor(e[1]))) for e in ends}
    assert min(losses, key=losses.get) == M.minimum == (0.0, 0.0)
    assert sorted(losses.values())[1] > 1                   # the others are well above it


def test_at_the_demo_settings_plain_sgd_is_stuck_and_momentum_rolls_through():
    lr, steps = optimlab.DEMO["lr"], optimlab.DEMO["steps"]
    plain = optimlab.sgd_path("mountains", None, lr, 0.0, steps)
    assert plain.stuck and not plain.converged() and plain.final_loss > 5
    np.testing.assert_allclose(plain.points[-1], (-3.42, 0), atol=0.06)   # settling in
    assert np.linalg.norm(grad(plain.points[-1])) < 0.5
    rolls = optimlab.sgd_path("mountains", None, lr, 0.9, steps)
    assert rolls.converged() and not rolls.stuck
    for m in (0.5, 0.8):                                    # what the note says: not enough
        assert optimlab.sgd_path("mountains", None, lr, m, 300).stuck
    # the bowl and the valley have no such valley: nothing there is ever "stuck"
    for name in ("bowl", "valley"):
        for m in (0.0, 0.9):
            assert not optimlab.sgd_path(name, None, lr, m, steps).stuck


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_the_verdict_says_local_minimum_in_the_language(lang):
    t = i18n.translator(lang)
    plain = optimlab.sgd_path("mountains", None, 0.01, 0.0, 100)
    kind, text = optimlab.path_verdict(plain, t("loss.plain_sgd"), t)
    assert kind == "warning" and t("loss.stuck") in text
    assert i18n.significant(plain.final_loss, lang) in text
