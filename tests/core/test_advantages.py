"""Direct-OPD signals (shiftkit.advantages) and the K-candidate surrogate they feed (shiftkit.losses):
hand-computed values, degenerate cases, and optimized == reference checks."""

import math

import pytest
import torch

from oracles import direct_opd, opd_candidates
from shiftkit import advantages, losses
from shiftkit import logprobs as LP

L = math.log


def test_sampled_reward_by_hand_with_scale_and_clip():
    t = torch.tensor([[L(0.5), L(0.2)]])
    r = torch.tensor([[L(0.25), L(0.4)]])
    adv = advantages.direct_opd_sampled(t, r)
    assert torch.allclose(adv, torch.tensor([[L(2.0), L(0.5)]]))
    adv = advantages.direct_opd_sampled(t, r, scale=2.0, clip=0.5)  # clip to +-0.5 then scale
    assert torch.allclose(adv, torch.tensor([[1.0, -1.0]]))


def test_student_topk_reward_by_hand():
    # one position, K=2 of a 4-token vocabulary; student probs 0.6 / 0.2 -> renormalised 0.75 / 0.25
    student = torch.log(torch.tensor([[[0.6, 0.2, 0.15, 0.05]]]))
    ids, slp = LP.topk_from_logits(student, 2)
    assert ids.tolist() == [[[0, 1]]]
    assert torch.allclose(slp, torch.log(torch.tensor([[[0.6, 0.2]]])), atol=1e-6)
    t = torch.log(torch.tensor([[[0.5, 0.4]]]))
    r = torch.log(torch.tensor([[[0.25, 0.1]]]))
    adv, w, delta = advantages.direct_opd_candidates(slp, t, r)
    assert torch.allclose(w, torch.tensor([[[0.75, 0.25]]]))
    assert torch.allclose(delta, torch.tensor([[[L(2), L(4)]]]))
    assert torch.allclose(adv, torch.tensor([[[0.75 * L(2), 0.25 * L(4)]]]))
    assert not adv.requires_grad


def test_full_vocab_reward_by_hand():
    s = torch.log(torch.tensor([[[0.5, 0.5]]]))
    t = torch.log(torch.tensor([[[0.8, 0.2]]]))
    r = torch.log(torch.tensor([[[0.4, 0.6]]]))
    adv, w, delta = advantages.direct_opd_full_vocab(s, t, r)
    assert torch.allclose(adv, torch.tensor([[[0.5 * L(2), 0.5 * L(1 / 3)]]]))


def test_gather_logprobs_at_arbitrary_ids():
    logits = torch.tensor([[[1.0, 2.0, 3.0]]])
    lp = LP.logprobs_from_logits(logits, torch.tensor([[[2, 0]]]))
    z = math.log(math.e + math.e**2 + math.e**3)
    assert torch.allclose(lp, torch.tensor([[[3 - z, 1 - z]]]))


def test_candidate_loss_by_hand_sums_over_k_then_token_mean():
    logp = torch.log(torch.tensor([[[0.6, 0.2], [0.5, 0.3]]])).requires_grad_()
    adv = torch.tensor([[[1.0, 2.0], [3.0, -1.0]]])
    mask = torch.tensor([[1, 1]])
    loss, m = losses.candidate_policy_loss(logp, logp.detach(), adv, mask)
    assert loss.item() == pytest.approx(-(1 + 2 + 3 - 1) / 2)  # ratio 1: -sum_k A / N
    loss.backward()
    assert torch.allclose(logp.grad, -adv / 2)  # REINFORCE over candidates
    assert m["clip_frac"].item() == 0 and m["ratio_mean"].item() == pytest.approx(1.0)


def test_candidate_loss_ppo_clip_by_hand():
    old = torch.zeros(1, 1, 3)
    logp = torch.log(torch.tensor([[[1.5, 0.5, 1.1]]]))
    adv = torch.tensor([[[1.0, -1.0, 1.0]]])
    loss, m = losses.candidate_policy_loss(logp, old, adv, torch.ones(1, 1), clip_low=0.2, clip_high=0.28)
    assert loss.item() == pytest.approx(-(1.28 - 0.8 + 1.1), abs=1e-6)  # one position, summed over K
    assert m["clip_frac"].item() == pytest.approx(2 / 3)


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean"])
@pytest.mark.parametrize("clip", [None, 0.2])
def test_candidate_loss_k1_equals_policy_loss(agg, clip):
    g = torch.Generator().manual_seed(0)
    logp = torch.randn(3, 5, generator=g).requires_grad_()
    old = logp.detach() + 0.1 * torch.randn(3, 5, generator=g)
    adv = torch.randn(3, 5, generator=g)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    a, _ = losses.policy_loss(logp, old, adv, mask, clip_low=clip, aggregation=agg)
    ga, = torch.autograd.grad(a, logp)
    b, _ = losses.candidate_policy_loss(logp.unsqueeze(-1), old.unsqueeze(-1), adv.unsqueeze(-1), mask,
                                        clip_low=clip, aggregation=agg)
    gb, = torch.autograd.grad(b, logp)
    assert torch.allclose(a, b) and torch.allclose(ga, gb)


def test_candidate_loss_fully_masked_is_zero_with_valid_grad():
    logp = torch.full((2, 3, 4), float("nan")).requires_grad_()
    loss, _ = losses.candidate_policy_loss(logp, torch.zeros(2, 3, 4), torch.ones(2, 3, 4), torch.zeros(2, 3))
    loss.backward()
    assert loss.item() == 0 and torch.all(logp.grad == 0)


def _topk_loss(logits, t_logits, r_logits, k):
    ids, _ = LP.topk_from_logits(logits.detach(), k)
    slp = LP.logprobs_from_logits(logits, ids)
    adv, _, _ = advantages.direct_opd_candidates(slp, LP.logprobs_from_logits(t_logits, ids),
                                             LP.logprobs_from_logits(r_logits, ids))
    return losses.candidate_policy_loss(slp, slp.detach(), adv, torch.ones(logits.shape[:2]))[0]


def test_full_vocab_is_the_limit_of_student_topk_and_the_exact_expected_reward_gradient():
    g = torch.Generator().manual_seed(1)
    B, T, V = 2, 3, 11
    logits = torch.randn(B, T, V, generator=g).requires_grad_()
    t, r = torch.randn(B, T, V, generator=g), torch.randn(B, T, V, generator=g)
    adv, _, _ = advantages.direct_opd_full_vocab(logits.detach(), t, r)
    lp = logits.log_softmax(-1)
    full = losses.candidate_policy_loss(lp, lp.detach(), adv, torch.ones(B, T))[0]
    g_full, = torch.autograd.grad(full, logits)
    lp = logits.log_softmax(-1)
    # reference: the gradient of the exact expected reward sum_v p(v) Delta(v) (token mean)
    delta = t.log_softmax(-1) - r.log_softmax(-1)
    expected = -(lp.exp() * delta).sum(-1).mean()
    g_ref, = torch.autograd.grad(expected, logits)
    assert torch.allclose(g_full, g_ref, atol=1e-6)
    # student_topk with K = V is full_vocab (same loss and gradient), and the error shrinks to 0 as K grows
    errs = []
    for k in (1, 4, 8, V):
        gk, = torch.autograd.grad(_topk_loss(logits, t, r, k), logits)
        errs.append((gk - g_full).norm().item())
    assert errs[-1] < 1e-6
    assert errs[0] > errs[2] > errs[-1]
    assert _topk_loss(logits, t, r, V).item() == pytest.approx(full.item(), abs=1e-6)


def test_identical_teacher_and_reference_give_zero_reward_and_only_kl_gradient():
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(2, 3, 7, generator=g).requires_grad_()
    t = torch.randn(2, 3, 7, generator=g)
    for mode_adv in (advantages.direct_opd_full_vocab(logits.detach(), t, t.clone())[0],
                     advantages.direct_opd_candidates(*[LP.logprobs_from_logits(x, LP.topk_from_logits(logits.detach(), 4)[0])
                                                    for x in (logits.detach(), t, t.clone())])[0]):
        assert torch.all(mode_adv == 0)
    ids, _ = LP.topk_from_logits(logits.detach(), 4)
    slp = LP.logprobs_from_logits(logits, ids)
    adv = advantages.direct_opd_candidates(slp, LP.logprobs_from_logits(t, ids), LP.logprobs_from_logits(t, ids))[0]
    pg, _ = losses.candidate_policy_loss(slp, slp.detach(), adv, torch.ones(2, 3))
    g_pg, = torch.autograd.grad(pg, logits, retain_graph=True)
    assert torch.all(g_pg == 0)
    # with the KL anchor at the starting policy the KL term is 0 too (and its gradient vanishes)
    sampled = torch.tensor([[0, 1, 2], [3, 4, 5]])
    lp_s = LP.logprobs_from_logits(logits, sampled.unsqueeze(-1)).squeeze(-1)
    kl, kl_mean = losses.kl_penalty(lp_s, lp_s.detach(), torch.ones(2, 3), 2.5)
    g_kl, = torch.autograd.grad(pg + kl, logits)
    assert kl_mean.item() == 0 and torch.allclose(g_kl, torch.zeros_like(g_kl), atol=1e-7)


def test_k3_kl_anchor_by_hand():
    logp = torch.tensor([[L(0.5)]])
    ref = torch.tensor([[L(0.25)]])
    # r = ref - logp = log(0.5); k3 = e^r - r - 1 = 0.5 + log 2 - 1
    loss, mean = losses.kl_penalty(logp, ref, torch.ones(1, 1), 2.0)
    assert mean.item() == pytest.approx(0.5 + L(2) - 1)
    assert loss.item() == pytest.approx(2 * (0.5 + L(2) - 1))


def test_adaptive_kl_coef_by_hand():
    assert advantages.adaptive_kl_coef(2.0, 0.3, 0.01) == pytest.approx(2.02)
    assert advantages.adaptive_kl_coef(2.0, -1e-9, 0.01) == pytest.approx(1.98)
    assert advantages.adaptive_kl_coef(2.0, 0.0, 0.01) == 2.0
    assert advantages.adaptive_kl_coef(2.5, 0.3, 0.01) == 2.5  # clipped at alpha_max
    assert advantages.adaptive_kl_coef(0.501, -0.3, 0.01) == 0.5  # clipped at alpha_min
    a = 2.5
    for _ in range(3):
        a = advantages.adaptive_kl_coef(a, -0.013)
    assert a == pytest.approx(2.5 * 0.99**3)


def _heads(B=2, T=5, H=6, V=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    mk = lambda temp: LP.Head(torch.randn(B, T, H, generator=g), torch.randn(V, H, generator=g),  # noqa: E731
                              torch.randn(V, generator=g), temp)
    return mk(0.7), mk(1.0), mk(1.0)


@pytest.mark.parametrize("mode,top_q,vanilla", [("sampled", 1.0, False), ("student_topk", 1.0, False),
                                                 ("student_topk", 0.5, False), ("full_vocab", 1.0, False),
                                                 ("full_vocab", 0.4, False), ("sampled", 1.0, True)])
def test_direct_opd_signal_chunked_equals_the_full_logit_oracle(mode, top_q, vanilla):
    """The one signal (per micro-batch, on chunked heads; chunks of 4 cross rows) == tests/oracles.py on
    [B, T, V] logits: candidates, advantages, the student's log-probs, the per-position reward and Delta."""
    s, t, r = _heads()
    B, T, V = 2, 5, 9
    logits = {k: LP.logits_of(h).view(B, T, V) for k, h in (("s", s), ("t", t), ("r", r))}
    comp = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(1))
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    sig = advantages.direct_opd_signal(s, t, None if vanilla else r, comp, mask, mode=mode, k=3, scale=1.5,
                                       clip=0.8, top_q=top_q, chunk=4)
    ids = opd_candidates(mode, logits["s"], comp, 3)
    m = mask.bool()
    if vanilla:
        adv = delta = advantages.vanilla_opd_advantage(LP.logprobs_from_logits(logits["s"], ids),
                                                       LP.logprobs_from_logits(logits["t"], ids), scale=1.5)
    else:
        adv, delta, _ = direct_opd(logits["s"], logits["t"], logits["r"], ids, mask, mode=mode, scale=1.5, clip=0.8,
                                   top_q=top_q)
    torch.testing.assert_close(sig.reward_bt[m], adv.sum(-1)[m], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sig.delta_mean_bt[m], delta.mean(-1)[m], rtol=1e-5, atol=1e-6)
    dm = m.unsqueeze(-1).expand_as(delta)
    n, s1, s2, npos = (float(x) for x in sig.moments)
    assert n == dm.sum() and npos == (delta[dm] > 0).sum()
    assert s1 == pytest.approx(float(delta[dm].sum()), abs=1e-4) and s2 == pytest.approx(float((delta[dm] ** 2).sum()), rel=1e-5)
    assert (sig.keep_bt is None) == (top_q == 1) and (top_q == 1 or int(sig.keep_bt.sum()) == sum(math.ceil(top_q * n) for n in (4, 5)))
    if mode == "full_vocab":  # no [B, T, V]: only the statistics
        assert sig.ids_btk is None and sig.adv_btk is None
        return
    assert torch.equal(sig.ids_btk, ids)
    torch.testing.assert_close(sig.adv_btk, adv, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sig.student_lp_btk, LP.logprobs_from_logits(logits["s"], ids), rtol=1e-5, atol=1e-6)


def test_direct_opd_signal_refuses_vanilla_candidates():
    s, t, _ = _heads()
    with pytest.raises(ValueError, match="sampled token only"):
        advantages.direct_opd_signal(s, t, None, torch.zeros(2, 5, dtype=torch.long), torch.ones(2, 5),
                                     mode="student_topk")


def test_vanilla_opd_advantage_by_hand():
    adv = advantages.vanilla_opd_advantage(torch.tensor([[L(0.5), L(0.1)]]), torch.tensor([[L(0.25), L(0.4)]]))
    assert torch.allclose(adv, torch.tensor([[-L(2), L(4)]]))


def test_topq_mask_by_hand():
    score = torch.tensor([[0.1, 0.9, 0.5, 0.7, 5.0], [3.0, 1.0, 2.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]])
    m = advantages.topq_position_mask(score, mask, 0.5)  # ceil(0.5*4)=2, ceil(0.5*3)=2
    assert m.tolist() == [[False, True, False, True, False], [True, False, True, False, False]]
    assert torch.equal(advantages.topq_position_mask(score, mask, 1.0), mask.bool())
    assert advantages.topq_position_mask(score, torch.zeros_like(mask), 0.1).sum() == 0


def test_jsd_by_hand_and_symmetric():
    a = torch.log(torch.tensor([[[1.0, 1e-30]]]))
    b = torch.log(torch.tensor([[[1e-30, 1.0]]]))
    assert LP.jsd_from_logits(a, b).item() == pytest.approx(L(2), abs=1e-5)
    x, y = torch.randn(2, 3, 5), torch.randn(2, 3, 5)
    assert torch.allclose(LP.jsd_from_logits(x, y), LP.jsd_from_logits(y, x), atol=1e-6)
    assert torch.allclose(LP.jsd_from_logits(x, x), torch.zeros(2, 3), atol=1e-6)


def test_outcome_mix_by_hand():
    logp = torch.zeros(2, 1, 2, requires_grad=True)
    adv = torch.tensor([[[0.1, 0.2]], [[0.3, 0.4]]])
    sampled = torch.zeros(2, 1, requires_grad=True)
    lp2, adv2 = advantages.with_outcome_advantage(logp, adv, sampled, torch.tensor([1.0, -1.0]), 0.5)
    assert torch.allclose(adv2, torch.tensor([[[0.1, 0.2, 0.5]], [[0.3, 0.4, -0.5]]]))
    loss, _ = losses.candidate_policy_loss(lp2, lp2.detach(), adv2, torch.ones(2, 1))
    loss.backward()
    assert torch.allclose(sampled.grad, torch.tensor([[-0.25], [0.25]]))


def test_topk_overlap_by_hand():
    a = torch.tensor([[[3.0, 2.0, 1.0, 0.0]]])
    b = torch.tensor([[[0.0, 2.0, 3.0, 1.0]]])
    assert LP.topk_overlap_from_logits(a, b, 2).item() == pytest.approx(0.5)
    assert LP.topk_overlap_from_logits(a, a, 2).item() == 1.0


def test_opd_candidates_per_mode():
    logits = torch.tensor([[[0.0, 3.0, 1.0, 2.0], [5.0, 0.0, 0.0, 1.0]]])  # [B=1, T=2, V=4]
    comp = torch.tensor([[2, 0]])
    assert opd_candidates("sampled", logits, comp, 2).tolist() == [[[2], [0]]]
    assert opd_candidates("student_topk", logits, comp, 2).tolist() == [[[1, 3], [0, 3]]]
    assert opd_candidates("full_vocab", logits, comp, 2).tolist() == [[[0, 1, 2, 3]] * 2]
    with pytest.raises(ValueError, match="unknown Direct-OPD reward mode"):
        opd_candidates("topk", logits, comp, 2)


def test_direct_opd_by_hand_per_mode_and_top_q():
    # V = 2. teacher/ref probabilities per position chosen so that Delta is a round number:
    # pos 0: teacher (0.5, 0.5), ref (0.25, 0.75) -> Delta = (ln 2, ln 2/3); pos 1: teacher == ref -> Delta = 0
    t = torch.tensor([[[L(0.5), L(0.5)], [L(0.9), L(0.1)]]])
    r = torch.tensor([[[L(0.25), L(0.75)], [L(0.9), L(0.1)]]])
    s = torch.tensor([[[L(0.8), L(0.2)], [L(0.5), L(0.5)]]])  # the student's weights over the full vocab
    mask = torch.ones(1, 2)
    ids = torch.tensor([[[1], [0]]])  # sampled tokens
    adv, delta, jsd = direct_opd(s, t, r, ids, mask, mode="sampled")
    assert torch.allclose(adv, torch.tensor([[[math.log(0.5 / 0.75)], [0.0]]]), atol=1e-6)
    assert torch.equal(adv, delta) and jsd[0, 1] < 1e-7 and jsd[0, 0] > 1e-3
    full = torch.arange(2).expand(1, 2, 2)
    adv, delta, _ = direct_opd(s, t, r, full, mask, mode="full_vocab", scale=2.0)
    # w * 2 * Delta: pos 0: 0.8 * 2 ln 2, 0.2 * 2 ln(2/3); pos 1: 0
    want = torch.tensor([[[0.8 * 2 * math.log(2), 0.2 * 2 * math.log(2 / 3)], [0.0, 0.0]]])
    assert torch.allclose(adv, want, atol=1e-6)
    assert torch.allclose(delta[0, 0], torch.tensor([2 * math.log(2), 2 * math.log(2 / 3)]), atol=1e-6)
    # top_q = 0.5 keeps one of the two positions per row: the one with the larger JSD (position 0)
    adv_q, _, _ = direct_opd(s, t, r, full, mask, mode="full_vocab", scale=2.0, top_q=0.5)
    assert torch.allclose(adv_q, want, atol=1e-6)  # position 1 was 0 already
    t2 = torch.tensor([[[L(0.5), L(0.5)], [L(0.5), L(0.5)]]])  # now position 1 has the larger divergence
    r2 = torch.tensor([[[L(0.4), L(0.6)], [L(0.1), L(0.9)]]])
    adv_q, _, jsd = direct_opd(s, t2, r2, full, mask, mode="full_vocab", top_q=0.5)
    assert jsd[0, 1] > jsd[0, 0] and torch.all(adv_q[0, 0] == 0) and torch.all(adv_q[0, 1] != 0)
