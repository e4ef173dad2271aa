"""GAE, value loss and the token-reward layout: hand-computed values."""

import math

import torch

from shiftkit.advantages import gae, terminal_rewards, whiten
from shiftkit.losses import explained_variance, value_loss


def test_gae_hand_computed_gamma1_lambda095():
    r = torch.tensor([[0.0, 0.0, 1.0]])
    v = torch.tensor([[0.5, 0.6, 0.8]])
    adv, ret = gae(r, v, torch.ones(1, 3), gamma=1.0, lam=0.95)
    # t2: 1 - 0.8 = 0.2 ; t1: (0.8 - 0.6) + 0.95*0.2 = 0.39 ; t0: (0.6 - 0.5) + 0.95*0.39 = 0.4705
    assert torch.allclose(adv, torch.tensor([[0.4705, 0.39, 0.2]]), atol=1e-6)
    assert torch.allclose(ret, torch.tensor([[0.9705, 0.99, 1.0]]), atol=1e-6)


def test_gae_skips_tool_tokens_and_padding():
    # [assistant, tool, tool, assistant, pad]: the tool tokens' values (9.0) must not enter any delta
    r = torch.tensor([[0.0, 5.0, 5.0, 1.0, 7.0]])
    v = torch.tensor([[0.5, 9.0, 9.0, 0.8, 3.0]])
    m = torch.tensor([[1, 0, 0, 1, 0]])
    adv, ret = gae(r, v, m, gamma=1.0, lam=0.95)
    # t3: 1 - 0.8 = 0.2 ; t0: (0.8 - 0.5) + 0.95*0.2 = 0.49
    assert torch.allclose(adv, torch.tensor([[0.49, 0, 0, 0.2, 0]]), atol=1e-6)
    assert torch.allclose(ret, torch.tensor([[0.99, 0, 0, 1.0, 0]]), atol=1e-6)


def test_gae_lambda1_is_monte_carlo_and_gamma_discounts():
    r = torch.tensor([[0.0, 0.0, 2.0]])
    v = torch.tensor([[0.3, -1.0, 4.0]])
    adv, ret = gae(r, v, torch.ones(1, 3), gamma=1.0, lam=1.0)
    assert torch.allclose(ret, torch.full((1, 3), 2.0)) and torch.allclose(adv, 2.0 - v)
    _, ret = gae(r, torch.zeros(1, 3), torch.ones(1, 3), gamma=0.5, lam=1.0)
    assert torch.allclose(ret, torch.tensor([[0.5, 1.0, 2.0]]))


def test_terminal_rewards_on_last_generated_token():
    m = torch.tensor([[1, 1, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]])
    out = terminal_rewards(torch.tensor([1.0, 3.0, -1.0]), m)
    want = torch.zeros(3, 6)
    want[0, 3], want[2, 0] = 1.0, -1.0
    assert torch.equal(out, want)


def test_value_loss_hand_computed_with_clipping():
    v = torch.tensor([[1.0, 0.0, 2.0]], requires_grad=True)
    old = torch.tensor([[0.5, 0.0, 0.0]])
    R = torch.tensor([[2.0, 1.0, 0.0]])
    m = torch.tensor([[1, 1, 0]])
    loss, met = value_loss(v, old, R, m, clip=None)
    assert math.isclose(float(loss), 0.5 * (1.0 + 1.0) / 2, rel_tol=1e-6)
    loss, met = value_loss(v, old, R, m, clip=0.2)
    # t0: unclipped (1-2)^2 = 1, clipped 0.7-2 -> 1.69 (max) ; t1: 1 vs 1 -> 1 ; mean 1.345, times 0.5
    assert math.isclose(float(loss), 0.5 * (1.69 + 1.0) / 2, rel_tol=1e-6)
    assert math.isclose(float(met["value_clip_frac"]), 0.5)
    loss.backward()
    assert v.grad[0, 2] == 0 and v.grad[0, 0] == 0  # t0 took the clipped branch (no gradient), t2 masked
    assert math.isclose(float(v.grad[0, 1]), 0.5 * 2 * (0 - 1) / 2)


def test_value_loss_all_masked_is_zero_with_valid_backward():
    v = torch.ones(2, 3, requires_grad=True)
    loss, _ = value_loss(v, v.detach(), torch.zeros(2, 3), torch.zeros(2, 3), clip=0.2)
    loss.backward()
    assert float(loss) == 0.0 and torch.equal(v.grad, torch.zeros(2, 3))


def test_explained_variance_and_whiten():
    R = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    m = torch.ones(1, 4)
    assert explained_variance(R, R, m) == 1.0
    assert math.isclose(explained_variance(torch.full((1, 4), 2.5), R, m), 0.0, abs_tol=1e-6)
    w = whiten(torch.tensor([[1.0, 3.0, 100.0]]), torch.tensor([[1, 1, 0]]))
    assert torch.allclose(w, torch.tensor([[-1.0, 1.0, 0.0]]), atol=1e-6)
