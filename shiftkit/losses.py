"""Advantages -> gradients: every training objective, as pure tensor functions.

One interface for all policy-gradient style objectives (GRPO, Direct-OPD, vanilla OPD, agentic
multi-turn RL): the caller supplies a **per-token advantage** (from :mod:`shiftkit.advantages`) and
a token mask, and one clipped surrogate turns it into a loss: :func:`candidate_policy_loss` over K
candidates per position, with :func:`policy_loss` its K = 1 case. Besides it: the k3 KL penalty,
the (clipped) value loss, SFT's cross-entropy, and per-token measures (entropy, JSD, top-k overlap).
Nothing here reads a config object or ``self``; every function returns plain tensors or ``(loss, metrics)``.

Shapes: ``B`` rows (completions), ``T`` completion tokens, ``K`` candidates per position, ``V`` vocabulary.
"""

from __future__ import annotations

import torch

AGGREGATIONS = ("token_mean", "seq_mean")


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim=None) -> torch.Tensor:
    """Sum of ``x`` where ``mask`` is set; uses ``where`` so NaN/inf at masked slots cannot leak."""
    x = torch.where(mask.bool(), x, torch.zeros_like(x))
    return x.sum() if dim is None else x.sum(dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim=None) -> torch.Tensor:
    """Mean over masked entries; 0 (with a valid gradient) when nothing is masked in."""
    n = mask.float().sum() if dim is None else mask.float().sum(dim)
    return masked_sum(x, mask, dim) / n.clamp(min=1.0)


def aggregate(loss_BT: torch.Tensor, mask_BT: torch.Tensor, mode: str = "token_mean",
              num_tokens: float | torch.Tensor | None = None, num_seqs: float | None = None) -> torch.Tensor:
    """Reduce a per-token loss to a scalar.

    * ``token_mean``: sum over all valid tokens / number of valid tokens (DAPO-style).
    * ``seq_mean``: mean over rows of each row's token mean (original GRPO).

    ``num_tokens`` / ``num_seqs`` override the denominators with *global* counts, so that a batch
    split across data-parallel ranks gives exactly the single-process gradient.
    """
    if mode == "token_mean":
        denom = mask_BT.float().sum() if num_tokens is None else torch.as_tensor(num_tokens, dtype=torch.float32)
        return masked_sum(loss_BT, mask_BT) / denom.clamp(min=1.0)
    if mode == "seq_mean":
        per_seq_B = masked_mean(loss_BT, mask_BT, dim=-1)
        has_tok_B = mask_BT.sum(-1) > 0
        denom = has_tok_B.float().sum() if num_seqs is None else torch.as_tensor(float(num_seqs))
        return masked_sum(per_seq_B, has_tok_B) / denom.clamp(min=1.0)
    raise ValueError(f"unknown aggregation '{mode}' (use one of {', '.join(AGGREGATIONS)})")


K3_LOG_RATIO_CLAMP = 20.0  # verl's low_var_kl: the log-ratio is clamped to [-20, 20] ...
K3_VALUE_CLAMP = 10.0  # ... and the per-token k3 to [-10, 10] (slime clamps the value the same way)


def kl_k3(logp_BT: torch.Tensor, ref_logp_BT: torch.Tensor, clamp: bool = True) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref) per token: exp(r) - r - 1 with r = ref - logp (>= 0).

    ``clamp`` (default, as verl's ``low_var_kl``): ``r`` is clamped to [-20, 20] and the result to at
    most 10, so a token the policy has made very unlikely cannot overflow the loss; where a clamp is
    active the token's KL gradient is 0. ``clamp=False``: the raw estimator.
    """
    r_BT = ref_logp_BT - logp_BT
    if clamp:
        r_BT = r_BT.clamp(-K3_LOG_RATIO_CLAMP, K3_LOG_RATIO_CLAMP)
    kl_BT = torch.expm1(r_BT) - r_BT
    return kl_BT.clamp(-K3_VALUE_CLAMP, K3_VALUE_CLAMP) if clamp else kl_BT


def _clipped_surrogate(ratio: torch.Tensor, adv: torch.Tensor, clip_low: float | None,
                       clip_high: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A)`` and where the clipped term won.

    ``clip_high=None`` means "same as ``clip_low``"; ``clip_low=None`` leaves the lower side unbounded,
    so ``clip_low=None, clip_high=h`` clips the ratio above only; both ``None``: no clipping.
    """
    pg1 = ratio * adv
    hi = clip_low if clip_high is None else clip_high
    if clip_low is None and hi is None:
        return pg1, torch.zeros_like(pg1, dtype=torch.bool)
    pg2 = ratio.clamp(None if clip_low is None else 1.0 - clip_low, None if hi is None else 1.0 + hi) * adv
    return torch.minimum(pg1, pg2), pg2 < pg1


def candidate_policy_loss(
    logp_BTK: torch.Tensor,
    old_logp_BTK: torch.Tensor,
    adv_BTK: torch.Tensor,
    mask_BT: torch.Tensor,
    *,
    clip_low: float | None = None,
    clip_high: float | None = None,
    aggregation: str = "token_mean",
    num_tokens=None,
    num_seqs=None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The one PPO surrogate, over K candidates per position: the clipped surrogate of each candidate,
    **summed over K**, then aggregated over valid positions (official 3-D branch of verl's vanilla PPO
    loss; Direct-OPD's ``student_topk``/``full_vocab``). :func:`policy_loss` is its K = 1 case. At
    ratio 1 the gradient is ``-sum_k A_k grad logp_k / N``. ``adv_BTK`` is treated as a constant.
    """
    valid_BT1 = mask_BT.bool().unsqueeze(-1)
    valid_BTK = valid_BT1.expand_as(logp_BTK)
    ratio_BTK = torch.exp(torch.where(valid_BTK, logp_BTK - old_logp_BTK.detach(), torch.zeros_like(logp_BTK)))
    adv_BTK = torch.where(valid_BTK, adv_BTK.detach(), torch.zeros_like(adv_BTK))
    surrogate_BTK, clipped_BTK = _clipped_surrogate(ratio_BTK, adv_BTK, clip_low, clip_high)
    loss = aggregate(-surrogate_BTK.sum(-1), mask_BT, aggregation, num_tokens, num_seqs)
    m = mask_BT.bool()
    metrics = {
        "clip_frac": masked_mean(clipped_BTK.float().mean(-1), m).detach(),
        "ratio_mean": masked_mean(ratio_BTK.mean(-1), m).detach(),
    }
    return loss, metrics


def policy_loss(
    logp_BT: torch.Tensor,
    old_logp_BT: torch.Tensor,
    adv_BT: torch.Tensor,
    mask_BT: torch.Tensor,
    *,
    clip_low: float | None = None,
    clip_high: float | None = None,
    aggregation: str = "token_mean",
    num_tokens=None,
    num_seqs=None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The shared policy-gradient surrogate at one token per position: :func:`candidate_policy_loss`
    with K = 1 (GRPO, vanilla OPD, agentic PPO/GRPO).

    ``loss_t = -min(ratio_t * A_t, clip(ratio_t, 1-clip_low, 1+clip_high) * A_t)`` with
    ``ratio_t = exp(logp_t - old_logp_t)``. ``clip_high=None``: same as ``clip_low``;
    ``clip_low=None``: no lower clip (with ``clip_high`` set, the ratio is clipped above only).
    With neither it is the plain on-policy REINFORCE surrogate ``-ratio_t * A_t`` (gradient
    ``-A_t * grad logp_t`` at ratio 1).
    """
    return candidate_policy_loss(logp_BT.unsqueeze(-1), old_logp_BT.unsqueeze(-1), adv_BT.unsqueeze(-1), mask_BT,
                                 clip_low=clip_low, clip_high=clip_high, aggregation=aggregation,
                                 num_tokens=num_tokens, num_seqs=num_seqs)


def kl_penalty(logp_BT, ref_logp_BT, mask_BT, coef: float | torch.Tensor, aggregation: str = "token_mean",
               num_tokens=None, num_seqs=None, clamp: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``coef * aggregate(k3)`` (``clamp``: see :func:`kl_k3`); returns (loss, mean k3 over valid tokens)."""
    valid_BT = mask_BT.bool()
    ref_BT = ref_logp_BT.detach()
    kl_BT = kl_k3(torch.where(valid_BT, logp_BT, ref_BT), ref_BT, clamp)  # 0 (and no NaN grads) at padding
    return coef * aggregate(kl_BT, mask_BT, aggregation, num_tokens, num_seqs), masked_mean(kl_BT, mask_BT).detach()


def value_loss(values_BT: torch.Tensor, old_values_BT: torch.Tensor, returns_BT: torch.Tensor, mask_BT: torch.Tensor,
               clip: float | None = None, num_tokens=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``0.5 * max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2)``, token mean over ``mask``
    (plain ``0.5 * (V - R)^2`` with ``clip=None``)."""
    m_BT = mask_BT.bool()
    err_BT = torch.where(m_BT, values_BT - returns_BT.detach(), torch.zeros_like(values_BT))
    l_BT = err_BT.pow(2)
    clipped_BT = torch.zeros_like(m_BT)
    if clip is not None:
        old_BT = old_values_BT.detach()
        v_clip_BT = old_BT + (values_BT - old_BT).clamp(-clip, clip)
        l2_BT = torch.where(m_BT, v_clip_BT - returns_BT.detach(), torch.zeros_like(values_BT)).pow(2)
        clipped_BT = l2_BT > l_BT
        l_BT = torch.maximum(l_BT, l2_BT)
    loss = 0.5 * aggregate(l_BT, mask_BT, "token_mean", num_tokens)
    return loss, {"value_clip_frac": masked_mean(clipped_BT.float(), m_BT).detach(),
                  "value_mse": masked_mean(err_BT.detach().pow(2), m_BT)}


def explained_variance(values_BT: torch.Tensor, returns_BT: torch.Tensor, mask_BT: torch.Tensor) -> float:
    """``1 - Var[R - V] / Var[R]`` over masked tokens (1 = perfect critic, <= 0 = no better than a constant)."""
    m = mask_BT.bool()
    r, v = returns_BT[m].float(), values_BT[m].float()
    var_r = r.var(unbiased=False)
    if r.numel() < 2 or var_r <= 0:
        return float("nan")
    return float(1 - (r - v).var(unbiased=False) / var_r)


def sft_loss(logits_BTV: torch.Tensor, labels_BT: torch.Tensor, mask_BT: torch.Tensor,
             num_tokens=None) -> torch.Tensor:
    """Token-mean cross-entropy of ``labels`` where ``mask`` is set."""
    return sft_loss_from_logprobs(logits_BTV.float().log_softmax(-1).gather(-1, labels_BT.unsqueeze(-1)).squeeze(-1),
                                  mask_BT, num_tokens)


def sft_loss_from_logprobs(logp_BT: torch.Tensor, mask_BT: torch.Tensor, num_tokens=None) -> torch.Tensor:
    """:func:`sft_loss` from the labels' log-probs (e.g. :func:`shiftkit.logprobs.token_logprobs`, no ``[B, T, V]``)."""
    return aggregate(-logp_BT, mask_BT, "token_mean", num_tokens)


def entropy_from_logits(logits_BTV: torch.Tensor) -> torch.Tensor:
    """Per-token entropy ``[B, T]`` of softmax(logits)."""
    logp_BTV = logits_BTV.float().log_softmax(-1)
    return -(logp_BTV.exp() * logp_BTV).sum(-1)


# ---- log-probs at candidates, and per-token measures (diagnostics and the top-q score) ----

def gather_logprobs(logits_BTV: torch.Tensor, ids_BTK: torch.Tensor) -> torch.Tensor:
    """Exact log-probs (softmax over the full vocabulary, fp32) at arbitrary candidate ids ``[B,T,K]``."""
    return logits_BTV.float().log_softmax(-1).gather(-1, ids_BTK)


def jsd_from_logits(a_BTV: torch.Tensor, b_BTV: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence (nats) between two next-token distributions, per position ``[B,T]``."""
    la_BTV, lb_BTV = a_BTV.float().log_softmax(-1), b_BTV.float().log_softmax(-1)
    lm_BTV = torch.logaddexp(la_BTV, lb_BTV) - torch.log(torch.tensor(2.0))
    kl_a = (la_BTV.exp() * (la_BTV - lm_BTV)).sum(-1)
    kl_b = (lb_BTV.exp() * (lb_BTV - lm_BTV)).sum(-1)
    return (0.5 * (kl_a + kl_b)).clamp(min=0.0)


def topk_overlap(a_logits_BTV: torch.Tensor, b_logits_BTV: torch.Tensor, k: int) -> torch.Tensor:
    """Fraction of shared ids between the top-``k`` sets of two distributions, per position ``[B,T]``."""
    k = min(k, a_logits_BTV.shape[-1])
    ia = a_logits_BTV.topk(k, -1).indices
    ib = b_logits_BTV.topk(k, -1).indices
    return (ia.unsqueeze(-1) == ib.unsqueeze(-2)).any(-1).float().mean(-1)
