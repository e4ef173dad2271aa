"""Every training objective and advantage, as pure tensor functions.

One interface for all policy-gradient style objectives (GRPO, Direct-OPD, vanilla OPD, agentic
multi-turn RL): the caller supplies a **per-token advantage** ``adv_BT`` and a token mask, and
:func:`policy_loss` turns it into a loss. GRPO broadcasts a sequence advantage to its tokens; OPD
methods compute a dense per-token signal (see :mod:`shiftkit.opd.signals`). Nothing here reads a
config object or ``self``; every function returns plain tensors or ``(loss, metrics)``.

Shapes: ``B`` rows (completions), ``T`` completion tokens, ``G`` group size, ``V`` vocabulary.
"""

from __future__ import annotations

import torch

AGGREGATIONS = ("token_mean", "seq_mean", "seq_sum_token_mean")


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
    raise ValueError(f"unknown aggregation '{mode}' (use one of {AGGREGATIONS[:2]})")


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


def kl_k3(logp_BT: torch.Tensor, ref_logp_BT: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref) per token: exp(r) - r - 1 with r = ref - logp (>= 0)."""
    r_BT = ref_logp_BT - logp_BT
    return torch.expm1(r_BT) - r_BT


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
    ``ratio_t = exp(logp_t - old_logp_t)``. With ``clip_low=None`` it is the plain on-policy
    REINFORCE surrogate ``-ratio_t * A_t`` (gradient ``-A_t * grad logp_t`` at ratio 1).
    """
    valid_BT = mask_BT.bool()
    # where() (not a multiply) so NaN/inf at padded slots can't reach values or gradients
    ratio_BT = torch.exp(torch.where(valid_BT, logp_BT - old_logp_BT.detach(), torch.zeros_like(logp_BT)))
    adv_BT = torch.where(valid_BT, adv_BT, torch.zeros_like(adv_BT))
    pg1_BT = ratio_BT * adv_BT
    if clip_low is None:
        surrogate_BT = pg1_BT
        clipped_BT = torch.zeros_like(pg1_BT, dtype=torch.bool)
    else:
        hi = clip_low if clip_high is None else clip_high
        pg2_BT = ratio_BT.clamp(1.0 - clip_low, 1.0 + hi) * adv_BT
        surrogate_BT = torch.minimum(pg1_BT, pg2_BT)
        clipped_BT = pg2_BT < pg1_BT
    loss = aggregate(-surrogate_BT, mask_BT, aggregation, num_tokens, num_seqs)
    m = mask_BT.bool()
    metrics = {
        "clip_frac": masked_mean(clipped_BT.float(), m).detach(),
        "ratio_mean": masked_mean(ratio_BT, m).detach(),
    }
    return loss, metrics


def kl_penalty(logp_BT, ref_logp_BT, mask_BT, coef: float | torch.Tensor, aggregation: str = "token_mean",
               num_tokens=None, num_seqs=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``coef * aggregate(k3)``; returns (loss, mean k3 over valid tokens)."""
    valid_BT = mask_BT.bool()
    ref_BT = ref_logp_BT.detach()
    kl_BT = kl_k3(torch.where(valid_BT, logp_BT, ref_BT), ref_BT)  # 0 (and no NaN grads) at padding
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
