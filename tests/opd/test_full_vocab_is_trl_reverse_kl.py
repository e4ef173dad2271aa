"""The objective ``benchmarks/bench_opd_step.py`` compares: shiftkit's full-vocabulary Direct-OPD loss with the
student itself as the reference is TRL 1.16's ``DistillationTrainer`` loss at ``beta=1`` (the full-vocabulary
reverse KL ``sum_v p_s(v) (log p_s(v) - log p_t(v))``, token mean), in value and in gradient.

With ``Delta = log p_t - log p_s`` (the reference is the student, detached) the candidate surrogate's gradient
is ``-sum_v p_s(v) Delta(v) grad log p_s(v)``, which is the gradient of the reverse KL (the ``+1`` of
``grad p log p`` vanishes since ``sum_v grad p_s(v) = 0``). TRL: ``trl/trainer/distillation_trainer.py``,
``_chunked_divergence_loss`` (``beta``: 0 forward KL, 1 reverse KL).
"""

import pytest
import torch

from shiftkit import logprobs as LP
from shiftkit import losses

trl_dt = pytest.importorskip("trl.trainer.distillation_trainer")


def heads(seed=0, B=2, T=5, H=8, Ht=12, V=30):
    g = torch.Generator().manual_seed(seed)
    hs = torch.randn(B, T, H, generator=g).requires_grad_()
    Ws = torch.randn(V, H, generator=g).requires_grad_()
    ht, Wt = torch.randn(B, T, Ht, generator=g), torch.randn(V, Ht, generator=g)
    mask = torch.ones(B, T)
    mask[1, 3:] = 0
    return hs, Ws, ht, Wt, mask


def test_full_vocab_loss_with_the_student_as_reference_is_trls_reverse_kl():
    hs, Ws, ht, Wt, mask = heads()
    trl_loss, _, _ = trl_dt._chunked_divergence_loss(hs, ht, Ws, Wt, mask, beta=1.0)
    trl_grad = torch.autograd.grad(trl_loss, [hs, Ws])
    s, t = LP.Head(hs, Ws), LP.Head(ht, Wt)
    ours, _ = losses.direct_opd_full_vocab_loss(s, t, s.detach(), mask, chunk=3)
    our_grad = torch.autograd.grad(ours, [hs, Ws])
    # by hand: token-mean reverse KL
    ls, lt = (hs @ Ws.T).log_softmax(-1), (ht @ Wt.T).log_softmax(-1)
    kl = ((ls.exp() * (ls - lt)).sum(-1) * mask).sum() / mask.sum()
    assert torch.allclose(trl_loss, kl, atol=1e-5) and torch.allclose(ours, kl, atol=1e-5)
    for a, b in zip(trl_grad, our_grad):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5), (a - b).abs().max()


def test_a_frozen_reference_other_than_the_student_is_another_objective():
    """The degenerate side: with any other reference the gradient is not the reverse KL's."""
    hs, Ws, ht, Wt, mask = heads(seed=1)
    trl_loss, _, _ = trl_dt._chunked_divergence_loss(hs, ht, Ws, Wt, mask, beta=1.0)
    trl_grad = torch.autograd.grad(trl_loss, [Ws])[0]
    s, t = LP.Head(hs, Ws), LP.Head(ht, Wt)
    other = LP.Head(hs.detach() + 0.3, Ws.detach())
    ours, _ = losses.direct_opd_full_vocab_loss(s, t, other, mask)
    assert not torch.allclose(torch.autograd.grad(ours, [Ws])[0], trl_grad, atol=1e-3)
