"""The conventions an outside reader compares with verl: the clip keys' one rule (0 = off, every loop),
dual-clip PPO (``clip_dual``, verl's ``clip_ratio_c``) with verl's log-ratio clamp, the whitening variance
(``unbiased``: verl's ``masked_whiten``), and unscorable (``None``) rewards in group advantages.

verl references (volcengine/verl at b178a3cd, ``verl/trainer/ppo/core_algos.py``
``compute_policy_loss_vanilla``; ``verl/utils/torch_functional.py`` ``masked_var`` / ``masked_whiten``) are
transcribed below line for line (``_verl_*``), so the comparison is with their formula, not ours.
"""

import math

import pytest
import torch

from shiftkit import advantages, losses
from shiftkit.errors import ShiftkitError


# ---- verl, transcribed ----------------------------------------------------------------------------

def _verl_masked_mean(values, mask):
    return (values * mask).sum() / (mask.sum() + 1e-8)


def _verl_masked_whiten(values, mask):
    mean = _verl_masked_mean(values, mask)
    var = _verl_masked_mean((values - mean) ** 2, mask)
    var = var * (mask.sum() / (mask.sum() - 1))  # unbiased (verl's default)
    return (values - mean) * torch.rsqrt(var + 1e-8)


def _verl_vanilla_pg_loss(old_log_prob, log_prob, advantages_, response_mask, clip_low, clip_high, clip_ratio_c):
    negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    pg_losses1 = -advantages_ * ratio
    pg_losses2 = -advantages_ * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_losses3 = -advantages_ * clip_ratio_c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_losses = torch.where(advantages_ < 0, clip_pg_losses2, clip_pg_losses1)
    return (pg_losses * response_mask).sum() / response_mask.sum()  # token-mean


# ---- the clip keys' rule ------------------------------------------------------------------------------

def test_clip_keys_zero_means_off_in_one_rule():
    assert losses.ppo_clip(0, 0) == {"clip_low": None, "clip_high": None, "clip_dual": None}  # REINFORCE
    assert losses.ppo_clip(0.2, 0) == {"clip_low": 0.2, "clip_high": 0.2, "clip_dual": None}  # high = low
    assert losses.ppo_clip(0, 0.28) == {"clip_low": None, "clip_high": 0.28, "clip_dual": None}  # above only
    assert losses.ppo_clip(0.2, 0.28, 3.0) == {"clip_low": 0.2, "clip_high": 0.28, "clip_dual": 3.0}
    for bad in ({"clip_low": -0.1}, {"clip_high": -1.0}, {"clip_dual": 1.0}, {"clip_dual": 0.5}):
        with pytest.raises(ShiftkitError, match="clip"):
            losses.ppo_clip(**bad)
    # off really is off: the zero keys give the unclipped surrogate's value and gradient at any ratio
    logp = torch.log(torch.tensor([[1.5, 0.5, 3.0]])).requires_grad_()
    adv = torch.tensor([[1.0, -1.0, -2.0]])
    loss, m = losses.policy_loss(logp, torch.zeros(1, 3), adv, torch.ones(1, 3), **losses.ppo_clip(0, 0))
    loss.backward()
    assert loss.item() == pytest.approx(-(1.5 - 0.5 - 6.0) / 3) and m["clip_frac"].item() == 0
    assert torch.allclose(logp.grad, -adv * torch.tensor([[1.5, 0.5, 3.0]]) / 3)


# ---- dual clip ----------------------------------------------------------------------------------------

def test_dual_clip_by_hand():
    # ratios 5, 5, 0.9 and advantages -1, +1, -1; clip 0.2/0.2, dual c = 3
    logp = torch.log(torch.tensor([[5.0, 5.0, 0.9]])).requires_grad_()
    adv = torch.tensor([[-1.0, 1.0, -1.0]])
    loss, m = losses.policy_loss(logp, torch.zeros(1, 3), adv, torch.ones(1, 3), clip_low=0.2, clip_dual=3.0)
    # t0: A<0, min(-5, -1.2) = -5, dual max(-3, -5) = -3 ; t1: min(5, 1.2) = 1.2 ; t2: inside the clip, -0.9
    assert loss.item() == pytest.approx(-(-3.0 + 1.2 - 0.9) / 3, abs=1e-6)
    assert m["dual_clip_frac"].item() == pytest.approx(1 / 3) and m["clip_frac"].item() == pytest.approx(1 / 3)
    loss.backward()
    assert logp.grad[0, 0] == 0 and logp.grad[0, 1] == 0  # both clipped: no gradient
    assert logp.grad[0, 2].item() == pytest.approx(0.9 / 3)  # -A * ratio / N, unclipped
    off, m_off = losses.policy_loss(logp.detach(), torch.zeros(1, 3), adv, torch.ones(1, 3), clip_low=0.2)
    assert off.item() == pytest.approx(-(-5.0 + 1.2 - 0.9) / 3, abs=1e-6) and m_off["dual_clip_frac"] == 0


@pytest.mark.parametrize("clip", [(0.2, 0.28), (0.2, 0.2)])
def test_dual_clip_equals_verl_vanilla_loss_in_value_and_gradient(clip):
    g = torch.Generator().manual_seed(0)
    old = torch.randn(4, 9, generator=g) - 2
    logp = (old + 1.5 * torch.randn(4, 9, generator=g)).requires_grad_()
    logp.data[0, 0] = old[0, 0] + 30.0  # beyond the +-20 log-ratio clamp
    adv = torch.randn(4, 9, generator=g)
    mask = (torch.rand(4, 9, generator=g) > 0.2).float()
    ours, _ = losses.policy_loss(logp, old, adv, mask, clip_low=clip[0], clip_high=clip[1], clip_dual=3.0)
    (g_ours,) = torch.autograd.grad(ours, logp)
    verl = _verl_vanilla_pg_loss(old, logp, adv, mask, clip[0], clip[1], 3.0)
    (g_verl,) = torch.autograd.grad(verl, logp)
    assert torch.isfinite(ours) and ours.item() == pytest.approx(verl.item(), rel=1e-6)
    assert torch.allclose(g_ours * mask, g_verl * mask, atol=1e-7)
    without, _ = losses.policy_loss(logp, old, adv, mask, clip_low=clip[0], clip_high=clip[1])
    assert abs(without.item() - verl.item()) > 1e-3  # the dual clip binds here: off is a different loss


def test_dual_clip_in_the_candidate_loss():
    logp_BTK = torch.log(torch.tensor([[[5.0, 0.5]]]))
    adv_BTK = torch.tensor([[[-1.0, -1.0]]])
    loss, m = losses.candidate_policy_loss(logp_BTK, torch.zeros(1, 1, 2), adv_BTK, torch.ones(1, 1), clip_dual=3.0)
    assert loss.item() == pytest.approx(-(-3.0 - 0.5)) and m["dual_clip_frac"].item() == pytest.approx(0.5)


# ---- whitening ------------------------------------------------------------------------------------------

def test_whiten_biased_default_and_unbiased_as_verl():
    a = torch.tensor([[1.0, 3.0, 100.0], [5.0, 0.0, 0.0]])
    m = torch.tensor([[1, 1, 0], [1, 0, 0]])
    # valid 1, 3, 5: mean 3, biased var 8/3, unbiased var 4
    assert torch.allclose(advantages.whiten(a, m), torch.tensor([[-2, 0, 0], [2, 0, 0]]) / math.sqrt(8 / 3), atol=1e-6)
    assert torch.allclose(advantages.whiten(a, m, unbiased=True), torch.tensor([[-1.0, 0, 0], [1.0, 0, 0]]), atol=1e-6)
    g = torch.Generator().manual_seed(1)
    x, mask = torch.randn(5, 11, generator=g) * 3 + 1, (torch.rand(5, 11, generator=g) > 0.3).float()
    ours, verl = advantages.whiten(x, mask, unbiased=True), _verl_masked_whiten(x, mask)
    assert torch.allclose(ours[mask.bool()], verl[mask.bool()], rtol=1e-5, atol=1e-6)
    assert (ours * (1 - mask)).abs().max() == 0  # 0 off the mask (verl leaves those entries to its mask)
    one = advantages.whiten(torch.tensor([[4.0, 7.0]]), torch.tensor([[1, 0]]), unbiased=True)
    assert torch.equal(one, torch.zeros(1, 2))  # a single token: 0, not a division by n - 1 = 0


# ---- unscorable rewards -----------------------------------------------------------------------------

def test_unscorable_rewards_get_no_advantage_and_give_none():
    nan = float("nan")
    r = torch.tensor([1.0, nan, 0.0, 1.0, 1.0, 1.0, nan, 1.0, nan, nan, nan, nan, 0.0, 1.0, 0.0, 1.0])
    adv = advantages.group_advantages(r, 4)
    # group 0: scorable 1, 0, 1 -> mean 2/3, unbiased std sqrt(1/3)
    s = math.sqrt(1 / 3) + 1e-6
    assert torch.allclose(adv[:4], torch.tensor([1 / 3 / s, 0.0, -2 / 3 / s, 1 / 3 / s]), atol=1e-6)
    assert torch.equal(adv[4:8], torch.zeros(4))  # 1, 1, None, 1: no signal (None is not a 0 reward)
    assert torch.equal(adv[8:12], torch.zeros(4))  # nothing scorable
    assert torch.equal(adv[12:], advantages.group_advantages(r[12:], 4))  # untouched groups as before
    assert torch.allclose(advantages.group_advantages(r, 4, scale="none")[:4], torch.tensor([1 / 3, 0, -2 / 3, 1 / 3]))
    assert not torch.isnan(adv).any()
