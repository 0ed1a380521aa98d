"""optimlab: cross-entropy by hand vs nn.CrossEntropyLoss, the loss surfaces, and SGD paths
made by torch.optim.SGD compared with the update rule computed by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn as nn

from cifarlab.lab import loss as optimlab
from cifarlab.core.model import Net


# ------------------------------------------------------------------------------ cross-entropy

@pytest.mark.parametrize("trial", range(30))
def test_cross_entropy_by_hand_matches_pytorch(trial):
    rng = np.random.default_rng(trial)
    scale = [0.1, 1, 10, 50][trial % 4]
    z = rng.standard_normal(10) * scale
    label = int(rng.integers(0, 10))
    ce = optimlab.cross_entropy_by_hand(z, label)
    want = nn.CrossEntropyLoss()(torch.tensor(z[None]), torch.tensor([label])).item()
    assert ce["loss"] == pytest.approx(want, rel=1e-9, abs=1e-9)
    assert ce["torch_loss"] == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert ce["match"]
    assert ce["probs"].sum() == pytest.approx(1.0)
    np.testing.assert_allclose(ce["probs"], torch.softmax(torch.tensor(z), 0).numpy(), atol=1e-12)
    assert ce["p_true"] == pytest.approx(ce["probs"][label])
    if ce["p_true"] > 1e-300:
        assert ce["loss"] == pytest.approx(-math.log(ce["p_true"]), rel=1e-9)
    assert ce["prediction"] == int(np.argmax(z))
    np.testing.assert_allclose(ce["exps"], np.exp(z - z.max()))
    assert ce["sum_exp"] == pytest.approx(ce["exps"].sum())


def test_cross_entropy_lesson_example_and_uniform():
    ce = optimlab.cross_entropy_by_hand([2.0, 1.0, 0.1], 0)      # the lesson's cat/dog/frog
    assert ce["probs"] == pytest.approx([0.659, 0.242, 0.099], abs=1e-3)
    assert ce["loss"] == pytest.approx(0.417, abs=1e-3)
    assert optimlab.cross_entropy_by_hand([2.0, 1.0, 0.1], 2)["loss"] == \
        pytest.approx(2.317, abs=1e-3)
    assert optimlab.cross_entropy_by_hand(np.zeros(10), 7)["loss"] == pytest.approx(math.log(10))


def test_net_logits_is_the_seeded_tutorial_net():
    from cifarlab.core.data.pipelines import normalize

    img = np.random.default_rng(0).integers(0, 256, (3, 32, 32), dtype=np.uint8)
    z = optimlab.net_logits(img, seed=5)
    torch.manual_seed(5)
    net = Net().eval()
    want = net(normalize(torch.from_numpy(img.copy())[None]))[0].detach().numpy()
    np.testing.assert_allclose(z, want, atol=1e-6)
    assert not np.allclose(optimlab.net_logits(img, seed=6), z)


# ------------------------------------------------------------------------------------ surfaces

def test_loss_surfaces():
    for name, s in optimlab.SURFACES.items():
        surf = optimlab.loss_surface(name, grid=41)
        assert surf["z"].shape == (41, 41)
        assert surf["z"].min() >= 0
        mx, my = s.minimum
        assert float(s.fn(torch.tensor(mx), torch.tensor(my))) == pytest.approx(0.0)
        # the grid values are the function's values
        i, j = 7, 30
        assert surf["z"][i, j] == pytest.approx(
            float(s.fn(torch.tensor(surf["x"][j]), torch.tensor(surf["y"][i]))))
    surf = optimlab.loss_surface("bowl", grid=3)    # x −5, 0, 5 (columns); y −2.5, 0, 2.5 (rows)
    np.testing.assert_allclose(surf["z"], [[43.75, 31.25, 43.75], [12.5, 0, 12.5],
                                           [43.75, 31.25, 43.75]])


# ------------------------------------------------------------------------------------ SGD paths

def _grad(name, p):
    q = torch.tensor(p, dtype=torch.float64, requires_grad=True)
    optimlab.SURFACES[name].fn(q[0], q[1]).backward()
    return q.grad.numpy()


@pytest.mark.parametrize("name", list(optimlab.SURFACES))
@pytest.mark.parametrize("lr,momentum", [(0.01, 0.0), (0.01, 0.9), (0.003, 0.5), (0.02, 0.8)])
def test_first_steps_follow_the_update_rule_by_hand(name, lr, momentum):
    path = optimlab.sgd_path(name, None, lr, momentum, 6)
    assert path.points.shape == (7, 2) and len(path.losses) == 7
    p = np.array(optimlab.SURFACES[name].start, dtype=np.float64)
    buf = None
    np.testing.assert_allclose(path.points[0], p)
    for i in range(1, 7):
        g = _grad(name, p)
        buf = g.copy() if buf is None else momentum * buf + g    # PyTorch's momentum buffer
        p = p - lr * buf
        np.testing.assert_allclose(path.points[i], p, rtol=1e-12, atol=1e-12)
        fn = optimlab.SURFACES[name].fn
        assert path.losses[i] == pytest.approx(float(fn(torch.tensor(p[0]), torch.tensor(p[1]))))


def test_plain_sgd_first_step_on_the_bowl():
    path = optimlab.sgd_path("bowl", (2.0, 1.0), lr=0.1, momentum=0.0, steps=1)
    # grad of ½(x² + 10y²) at (2, 1) is (2, 10)
    np.testing.assert_allclose(path.points[1], [2 - 0.1 * 2, 1 - 0.1 * 10], atol=1e-12)


def test_small_lr_converges_large_lr_diverges():
    for momentum in (0.0, 0.9):
        ok = optimlab.sgd_path("bowl", None, lr=0.05, momentum=momentum, steps=300)
        assert not ok.diverged and ok.converged() and ok.steps == 300
        assert ok.losses[-1] < ok.losses[0] * 1e-3
        bad = optimlab.sgd_path("bowl", None, lr=0.5, momentum=momentum, steps=300)
        assert bad.diverged and bad.diverged_at is not None and not bad.converged()
        assert bad.steps == bad.diverged_at < 300               # stopped where it exploded
        assert bad.losses[-1] > bad.losses[0] * optimlab.EXPLODE_FACTOR or \
            not np.isfinite(bad.losses[-1])
    # plain SGD is unstable above 2/10 on the bowl; momentum 0.9 is still stable at 0.3
    assert optimlab.sgd_path("bowl", None, 0.3, 0.0, 300).diverged
    assert not optimlab.sgd_path("bowl", None, 0.3, 0.9, 300).diverged
    valley_ok = optimlab.sgd_path("valley", None, 0.01, 0.9, 300)
    assert not valley_ok.diverged and valley_ok.final_loss < valley_ok.losses[0]
    assert optimlab.sgd_path("valley", None, 0.2, 0.0, 300).diverged


def test_tiny_lr_is_still_walking():
    path = optimlab.sgd_path("bowl", None, lr=0.001, momentum=0.0, steps=50)
    assert not path.diverged and not path.converged()
    assert np.all(np.diff(path.losses) < 0)


@pytest.mark.parametrize("name", sorted(optimlab.SURFACES))
def test_the_pages_starting_values_show_momentum_winning(name):
    """The Loss page opens on DEMO: with those values momentum must end far below plain SGD on
    every surface, as the lesson beside the plot says (at lr 0.05 it ended slightly worse)."""
    d = optimlab.DEMO
    plain = optimlab.sgd_path(name, None, d["lr"], 0.0, d["steps"])
    heavy = optimlab.sgd_path(name, None, d["lr"], d["momentum"], d["steps"])
    assert not plain.diverged and not heavy.diverged
    assert heavy.final_loss < plain.final_loss / 100
    assert heavy.converged(tol=1e-2) and not plain.converged(tol=1e-2)
