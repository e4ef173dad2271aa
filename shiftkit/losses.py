"""Every training objective and advantage, as pure tensor functions.

One interface for all policy-gradient style objectives (GRPO, Direct-OPD, vanilla OPD, agentic
multi-turn RL): the caller supplies a **per-token advantage** ``adv_BT`` and a token mask, and
:func:`policy_loss` turns it into a loss. GRPO broadcasts a sequence advantage to its tokens; OPD
methods compute a dense per-token signal (the "Direct-OPD signals" section at the end of this module). Nothing here reads a
config object or ``self``; every function returns plain tensors or ``(loss, metrics)``.

Shapes: ``B`` rows (completions), ``T`` completion tokens, ``G`` group size, ``V`` vocabulary.
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


def group_advantages(rewards_B: torch.Tensor, group_size: int, scale: str = "std", eps: float = 1e-6) -> torch.Tensor:
    """GRPO advantages: reward minus its group mean, optionally divided by the group std.

    Rows ``[g*G:(g+1)*G]`` form group ``g``. ``scale``: ``std`` (GRPO), ``none`` (Dr. GRPO).
    A group whose rewards are all equal gets advantage 0.
    """
    if rewards_B.numel() % group_size:
        raise ValueError(f"{rewards_B.numel()} rewards do not split into groups of {group_size}")
    r_NG = rewards_B.float().view(-1, group_size)
    adv_NG = r_NG - r_NG.mean(-1, keepdim=True)
    if scale == "std":
        std_N1 = r_NG.std(-1, unbiased=True, keepdim=True) if group_size > 1 else torch.ones_like(r_NG[:, :1])
        adv_NG = adv_NG / (std_N1 + eps)
    elif scale != "none":
        raise ValueError(f"unknown advantage scale '{scale}' (use std or none)")
    return adv_NG.reshape(-1)


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
    """The shared policy-gradient surrogate for every algorithm here.

    ``loss_t = -min(ratio_t * A_t, clip(ratio_t, 1-clip_low, 1+clip_high) * A_t)`` with
    ``ratio_t = exp(logp_t - old_logp_t)``. ``clip_high=None``: same as ``clip_low``;
    ``clip_low=None``: no lower clip (with ``clip_high`` set, the ratio is clipped above only).
    With neither it is the plain on-policy REINFORCE surrogate ``-ratio_t * A_t`` (gradient
    ``-A_t * grad logp_t`` at ratio 1).
    """
    valid_BT = mask_BT.bool()
    # where() (not a multiply) so NaN/inf at padded slots can't reach values or gradients
    ratio_BT = torch.exp(torch.where(valid_BT, logp_BT - old_logp_BT.detach(), torch.zeros_like(logp_BT)))
    adv_BT = torch.where(valid_BT, adv_BT, torch.zeros_like(adv_BT))
    surrogate_BT, clipped_BT = _clipped_surrogate(ratio_BT, adv_BT, clip_low, clip_high)
    loss = aggregate(-surrogate_BT, mask_BT, aggregation, num_tokens, num_seqs)
    m = mask_BT.bool()
    metrics = {
        "clip_frac": masked_mean(clipped_BT.float(), m).detach(),
        "ratio_mean": masked_mean(ratio_BT, m).detach(),
    }
    return loss, metrics


def kl_penalty(logp_BT, ref_logp_BT, mask_BT, coef: float | torch.Tensor, aggregation: str = "token_mean",
               num_tokens=None, num_seqs=None, clamp: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``coef * aggregate(k3)`` (``clamp``: see :func:`kl_k3`); returns (loss, mean k3 over valid tokens)."""
    valid_BT = mask_BT.bool()
    ref_BT = ref_logp_BT.detach()
    kl_BT = kl_k3(torch.where(valid_BT, logp_BT, ref_BT), ref_BT, clamp)  # 0 (and no NaN grads) at padding
    return coef * aggregate(kl_BT, mask_BT, aggregation, num_tokens, num_seqs), masked_mean(kl_BT, mask_BT).detach()


def sft_loss(logits_BTV: torch.Tensor, labels_BT: torch.Tensor, mask_BT: torch.Tensor,
             num_tokens=None) -> torch.Tensor:
    """Token-mean cross-entropy of ``labels`` where ``mask`` is set."""
    nll_BT = -logits_BTV.float().log_softmax(-1).gather(-1, labels_BT.unsqueeze(-1)).squeeze(-1)
    return aggregate(nll_BT, mask_BT, "token_mean", num_tokens)


def entropy_from_logits(logits_BTV: torch.Tensor) -> torch.Tensor:
    """Per-token entropy ``[B, T]`` of softmax(logits)."""
    logp_BTV = logits_BTV.float().log_softmax(-1)
    return -(logp_BTV.exp() * logp_BTV).sum(-1)


# ---- Direct-OPD signals ----
#
# Direct-OPD (arXiv 2607.05394) treats a weak model's RL shift as a dense per-token reward:
# ``Delta(v | s_t) = log pi_teacher(v | s_t) - log pi_ref(v | s_t)`` (post-RL minus pre-RL), evaluated
# at states the *student* visits. Candidates ``v`` are the sampled token (``sampled``), the student's
# top-K tokens (``student_topk``, the official default, K=16) or the whole vocabulary (``full_vocab``).
# The per-candidate advantage is ``sg[w(v) * Delta(v)]`` with ``w`` the student's probabilities
# renormalised over the candidates (1 for ``sampled``); the loss is the PPO surrogate applied to each
# candidate and summed over candidates (:func:`candidate_policy_loss`), token-mean; plus the k3 KL to
# the student's own initial policy (:func:`kl_penalty`) with the sign-based adaptive coefficient
# (:func:`adaptive_kl_coef`). Shapes: ``K`` candidates per position.

OPD_REWARD_MODES = ("sampled", "student_topk", "full_vocab")


def gather_logprobs(logits_BTV: torch.Tensor, ids_BTK: torch.Tensor) -> torch.Tensor:
    """Exact log-probs (softmax over the full vocabulary, fp32) at arbitrary candidate ids ``[B,T,K]``."""
    return logits_BTV.float().log_softmax(-1).gather(-1, ids_BTK)


def student_topk(logits_BTV: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The student's top-``k`` candidate ids and their (full-softmax) log-probs, both ``[B,T,K]``."""
    logp_BTV = logits_BTV.float().log_softmax(-1)
    logp_BTK, ids_BTK = logp_BTV.topk(min(k, logp_BTV.shape[-1]), dim=-1)
    return ids_BTK, logp_BTK


def topk_weights(student_logp_BTK: torch.Tensor) -> torch.Tensor:
    """Student probabilities renormalised over the K candidates (sum to 1 per position), detached."""
    return student_logp_BTK.detach().float().softmax(-1)


def shape_delta(delta: torch.Tensor, scale: float = 1.0, clip: float = 0.0) -> torch.Tensor:
    """``scale * clamp(delta, -clip, clip)`` (``clip=0``: no clipping). Official: scale 1, no clip."""
    if clip > 0:
        delta = delta.clamp(-clip, clip)
    return scale * delta


def direct_opd_sampled(teacher_logp_BT: torch.Tensor, ref_logp_BT: torch.Tensor, *, scale: float = 1.0,
                       clip: float = 0.0) -> torch.Tensor:
    """``sampled`` mode: the advantage of each sampled token is its (shaped) Delta, ``[B,T]``."""
    return shape_delta((teacher_logp_BT.float() - ref_logp_BT.float()).detach(), scale, clip)


def direct_opd_candidates(student_logp_BTK: torch.Tensor, teacher_logp_BTK: torch.Tensor,
                          ref_logp_BTK: torch.Tensor, *, scale: float = 1.0,
                          clip: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``student_topk`` (and ``full_vocab`` with K = V): per-candidate advantage ``sg[w * Delta]``.

    ``w_BTK`` is the student's probability renormalised over the candidates (official
    ``softmax(student_topk_logp) * delta``). Returns ``(adv_BTK, w_BTK, delta_BTK)``; ``delta`` is
    the shaped (scaled/clipped) reward.
    """
    w_BTK = topk_weights(student_logp_BTK)
    delta_BTK = shape_delta((teacher_logp_BTK.float() - ref_logp_BTK.float()).detach(), scale, clip)
    return (w_BTK * delta_BTK).detach(), w_BTK, delta_BTK


def direct_opd_full_vocab(student_logits_BTV: torch.Tensor, teacher_logits_BTV: torch.Tensor,
                          ref_logits_BTV: torch.Tensor, *, scale: float = 1.0,
                          clip: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``full_vocab``: every token is a candidate, weights are the student's exact probabilities.

    With K = V, ``sum_v sg[p(v) Delta(v)] grad log p(v) = grad sum_v p(v) Delta(v)``: the exact
    gradient of the expected per-token reward (the top-K surrogate's extra "total top-K mass"
    term vanishes because the mass is 1). Returns ``(adv_BTV, w_BTV, delta_BTV)``.
    """
    return direct_opd_candidates(student_logits_BTV.float().log_softmax(-1), teacher_logits_BTV.float().log_softmax(-1),
                                 ref_logits_BTV.float().log_softmax(-1), scale=scale, clip=clip)


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
    """:func:`policy_loss` over K candidates per position: the PPO surrogate of each candidate,
    **summed over K**, then aggregated over valid positions (official 3-D branch of verl's vanilla
    PPO loss). With K = 1 it is exactly :func:`policy_loss`; at ratio 1 the gradient is
    ``-sum_k A_k grad logp_k / N``.
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


def vanilla_opd_advantage(student_logp_BT: torch.Tensor, teacher_logp_BT: torch.Tensor,
                          scale: float = 1.0) -> torch.Tensor:
    """Vanilla on-policy distillation: ``A_t = -scale * (log pi_student - log pi_teacher)`` at the
    sampled token (per-token reverse-KL as a reward), detached."""
    return (-scale * (student_logp_BT.float() - teacher_logp_BT.float())).detach()


def weighted_reward_mean(adv_BTK: torch.Tensor, mask_BT: torch.Tensor, num_tokens=None) -> torch.Tensor:
    """Token-mean of the per-position expected reward ``sum_k w_k Delta_k`` (the adaptive-KL signal)."""
    return aggregate(adv_BTK.sum(-1).detach(), mask_BT, "token_mean", num_tokens)


def adaptive_kl_coef(alpha: float, reward_mean: float, eps: float = 0.01, alpha_min: float = 0.5,
                     alpha_max: float = 2.5) -> float:
    """Official sign-based controller: ``alpha * (1 +- eps)`` when the weighted mean reward is
    positive / negative (unchanged at exactly 0), then clipped to ``[alpha_min, alpha_max]``."""
    if reward_mean > 0:
        alpha = alpha * (1 + eps)
    elif reward_mean < 0:
        alpha = alpha * (1 - eps)
    return float(min(alpha_max, max(alpha_min, alpha)))


def jsd_from_logits(a_BTV: torch.Tensor, b_BTV: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence (nats) between two next-token distributions, per position ``[B,T]``."""
    la_BTV, lb_BTV = a_BTV.float().log_softmax(-1), b_BTV.float().log_softmax(-1)
    lm_BTV = torch.logaddexp(la_BTV, lb_BTV) - torch.log(torch.tensor(2.0))
    kl_a = (la_BTV.exp() * (la_BTV - lm_BTV)).sum(-1)
    kl_b = (lb_BTV.exp() * (lb_BTV - lm_BTV)).sum(-1)
    return (0.5 * (kl_a + kl_b)).clamp(min=0.0)


def topq_position_mask(score_BT: torch.Tensor, mask_BT: torch.Tensor, top_q: float) -> torch.Tensor:
    """Keep, in each row, the ``ceil(top_q * n_valid)`` valid positions with the largest ``score``
    (S^2D-OPD's top-q% divergence mask; ties broken by position). ``top_q >= 1``: the mask itself."""
    valid_BT = mask_BT.bool()
    if top_q >= 1.0:
        return valid_BT
    n_keep_B = torch.ceil(top_q * valid_BT.sum(-1).float()).long()
    s_BT = torch.where(valid_BT, score_BT.float(), torch.full_like(score_BT, float("-inf"), dtype=torch.float32))
    order_BT = torch.sort(s_BT, dim=-1, descending=True, stable=True).indices
    rank_BT = torch.empty_like(order_BT).scatter_(-1, order_BT, torch.arange(s_BT.shape[-1]).expand_as(order_BT))
    return valid_BT & (rank_BT < n_keep_B[:, None])


def with_outcome_advantage(logp_BTK: torch.Tensor, adv_BTK: torch.Tensor, sampled_logp_BT: torch.Tensor,
                           outcome_adv_B: torch.Tensor, weight: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Mix a GRPO outcome advantage into the dense signal (official ``token_reward_direct_plus_grpo``):
    the sampled token becomes one more candidate whose advantage is ``weight * A_outcome`` of its
    sequence. Returns ``(logp_BT(K+1), adv_BT(K+1))``; at ratio 1 the gradient is that of
    ``sum_k A_k logp_k + weight * A_outcome * logp_sampled``."""
    out_BT1 = (weight * outcome_adv_B.float())[:, None, None].expand(*sampled_logp_BT.shape, 1)
    return (torch.cat([logp_BTK, sampled_logp_BT.unsqueeze(-1)], -1),
            torch.cat([adv_BTK, out_BT1.to(adv_BTK.dtype)], -1))


def topk_overlap(a_logits_BTV: torch.Tensor, b_logits_BTV: torch.Tensor, k: int) -> torch.Tensor:
    """Fraction of shared ids between the top-``k`` sets of two distributions, per position ``[B,T]``."""
    k = min(k, a_logits_BTV.shape[-1])
    ia = a_logits_BTV.topk(k, -1).indices
    ib = b_logits_BTV.topk(k, -1).indices
    return (ia.unsqueeze(-1) == ib.unsqueeze(-2)).any(-1).float().mean(-1)
