import math

import pytest
import torch

from shiftkit import losses
from shiftkit.evaluate import mean_stderr, pass_at_k, pass_at_k_reference


def test_group_advantages_by_hand():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    adv = losses.group_advantages(r, 4, scale="none")
    assert torch.allclose(adv, torch.tensor([0.75, -0.25, -0.25, -0.25, 0, 0, 0, 0]))
    adv = losses.group_advantages(r, 4, scale="std")
    std = math.sqrt((0.75**2 + 3 * 0.25**2) / 3)
    assert torch.allclose(adv[:4], torch.tensor([0.75, -0.25, -0.25, -0.25]) / (std + 1e-6))
    assert torch.all(adv[4:] == 0)  # degenerate group: no signal
    with pytest.raises(ValueError):
        losses.group_advantages(r, 3)


def test_aggregate_token_vs_seq_mean_by_hand():
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    assert losses.aggregate(loss, mask, "token_mean").item() == pytest.approx(10 / 4)
    assert losses.aggregate(loss, mask, "seq_mean").item() == pytest.approx((2 + 4) / 2)
    # global denominators (data parallel)
    assert losses.aggregate(loss, mask, "token_mean", num_tokens=8).item() == pytest.approx(10 / 8)


def test_policy_loss_on_policy_is_reinforce_by_hand():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    adv = torch.tensor([[0.5, 0.5]])
    mask = torch.ones(1, 2)
    loss, m = losses.policy_loss(logp, logp.detach(), adv, mask)
    assert loss.item() == pytest.approx(-0.5)
    loss.backward()
    assert torch.allclose(logp.grad, torch.tensor([[-0.25, -0.25]]))  # -A/N
    assert m["clip_frac"].item() == 0


def test_policy_loss_ppo_clip_by_hand():
    old = torch.zeros(1, 3)
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1]]))
    adv = torch.tensor([[1.0, -1.0, 1.0]])
    loss, m = losses.policy_loss(logp, old, adv, torch.ones(1, 3), clip_low=0.2, clip_high=0.28)
    # token0: min(1.5, 1.28)=1.28 ; token1: min(-0.5, -0.8) = -0.8 ; token2: 1.1
    assert loss.item() == pytest.approx(-(1.28 - 0.8 + 1.1) / 3, abs=1e-6)
    assert m["clip_frac"].item() == pytest.approx(2 / 3)


def test_fully_masked_batch_gives_zero_and_valid_grad():
    logp = torch.full((2, 3), float("nan")).requires_grad_()
    mask = torch.zeros(2, 3)
    loss, _ = losses.policy_loss(logp, torch.zeros(2, 3), torch.ones(2, 3), mask)
    loss.backward()
    assert loss.item() == 0 and torch.all(logp.grad == 0)


def test_kl_k3_by_hand_and_nonnegative():
    logp = torch.tensor([math.log(0.5), math.log(0.2)])
    ref = torch.tensor([math.log(0.25), math.log(0.2)])
    kl = losses.kl_k3(logp, ref)
    assert kl[0].item() == pytest.approx(0.5 - math.log(0.5) - 1)
    assert kl[1].item() == 0
    assert torch.all(losses.kl_k3(torch.randn(100), torch.randn(100)) >= 0)


def test_sft_loss_matches_cross_entropy():
    logits = torch.randn(2, 4, 7)
    labels = torch.randint(0, 7, (2, 4))
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    ref = torch.nn.functional.cross_entropy(logits[mask.bool()], labels[mask.bool()])
    assert losses.sft_loss(logits, labels, mask).item() == pytest.approx(ref.item(), rel=1e-6)


def test_pass_at_k_matches_binomial_and_edge_cases():
    for n, c, k in [(10, 3, 1), (10, 3, 5), (64, 1, 64), (64, 10, 8), (5, 0, 3)]:
        assert pass_at_k(n, c, k) == pytest.approx(pass_at_k_reference(n, c, k), abs=1e-12)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(4, 4, 2) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)
    m, se = mean_stderr([1.0, 0.0, 1.0, 0.0])
    assert m == 0.5 and se == pytest.approx(math.sqrt(1 / 3) / 2)
