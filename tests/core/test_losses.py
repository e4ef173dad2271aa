import math

import pytest
import torch

from shiftkit import advantages, losses
from shiftkit.metrics import mean_se as mean_stderr
from shiftkit.metrics import pass_at_k, pass_at_k_reference


def test_group_advantages_by_hand():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    adv = advantages.group_advantages(r, 4, scale="none")
    assert torch.allclose(adv, torch.tensor([0.75, -0.25, -0.25, -0.25, 0, 0, 0, 0]))
    adv = advantages.group_advantages(r, 4, scale="std")
    std = math.sqrt((0.75**2 + 3 * 0.25**2) / 3)
    assert torch.allclose(adv[:4], torch.tensor([0.75, -0.25, -0.25, -0.25]) / (std + 1e-6))
    assert torch.all(adv[4:] == 0)  # degenerate group: no signal
    with pytest.raises(ValueError):
        advantages.group_advantages(r, 3)


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


def test_kl_k3_clamps_log_ratio_and_value_like_verl():
    # verl low_var_kl: r = clamp(ref - logp, -20, 20); kl = clamp(exp(r) - r - 1, -10, 10)
    logp = torch.tensor([-50.0, 0.0, 0.0, 0.0])
    ref = torch.tensor([0.0, -30.0, 1.0, -1.0])
    kl = losses.kl_k3(logp, ref)
    assert torch.isfinite(kl).all()
    assert kl[0].item() == 10.0  # r = 50 -> 20 -> e^20 - 21 -> 10
    assert kl[1].item() == 10.0  # r = -30 -> -20 -> e^-20 + 19 -> 10
    assert kl[2].item() == pytest.approx(math.e - 2)  # inside the clamps: unchanged
    assert kl[3].item() == pytest.approx(math.exp(-1))
    raw = losses.kl_k3(logp, ref, clamp=False)  # the flag restores the raw estimator
    assert raw[0].item() == pytest.approx(math.expm1(50.0) - 50.0, rel=1e-5)
    assert raw[1].item() == pytest.approx(29.0, abs=1e-5)


def test_kl_penalty_clamped_is_finite_with_a_huge_log_ratio():
    logp = torch.tensor([[-200.0, -1.0]], requires_grad=True)
    ref = torch.tensor([[0.0, -1.0]])
    loss, mean = losses.kl_penalty(logp, ref, torch.ones(1, 2), 1.0)
    loss.backward()
    assert mean.item() == pytest.approx(5.0) and torch.isfinite(logp.grad).all()
    _, raw_mean = losses.kl_penalty(logp, ref, torch.ones(1, 2), 1.0, clamp=False)
    assert not torch.isfinite(raw_mean)  # what the clamp prevents: expm1(200) overflows fp32


def test_clip_high_applies_when_clip_low_is_off():
    # clip_low=None, clip_high=0.28: the ratio is clipped above only (lower side unbounded)
    old = torch.zeros(1, 3)
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1]]))
    adv = torch.tensor([[1.0, -1.0, 1.0]])
    loss, m = losses.policy_loss(logp, old, adv, torch.ones(1, 3), clip_low=None, clip_high=0.28)
    # token0: min(1.5, 1.28) = 1.28 ; token1: ratio 0.5 unclipped below: -0.5 ; token2: 1.1
    assert loss.item() == pytest.approx(-(1.28 - 0.5 + 1.1) / 3, abs=1e-6)
    assert m["clip_frac"].item() == pytest.approx(1 / 3)
    lk, mk = losses.candidate_policy_loss(logp.unsqueeze(-1), old.unsqueeze(-1), adv.unsqueeze(-1),
                                          torch.ones(1, 3), clip_low=None, clip_high=0.28)
    assert lk.item() == pytest.approx(loss.item(), abs=1e-6) and mk["clip_frac"].item() == pytest.approx(1 / 3)


def test_every_listed_aggregation_is_accepted():
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    for mode in losses.AGGREGATIONS:
        assert torch.isfinite(losses.aggregate(loss, mask, mode))
    with pytest.raises(ValueError, match="token_mean"):
        losses.aggregate(loss, mask, "seq_sum_token_mean")
