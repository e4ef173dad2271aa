"""Advantages -> gradients: every training objective, as pure tensor functions.

One interface for all policy-gradient style objectives (GRPO, Direct-OPD, vanilla OPD, agentic
multi-turn RL): the caller supplies a **per-token advantage** (from :mod:`shiftkit.advantages`) and
a token mask, and one clipped surrogate turns it into a loss: :func:`candidate_policy_loss` over K
candidates per position, with :func:`policy_loss` its K = 1 case. Besides it: the k3 KL penalty,
the (clipped) value loss, SFT's cross-entropy, and Direct-OPD's surrogate over the whole vocabulary
(:func:`direct_opd_full_vocab_loss`, chunk by chunk over the models' heads). The per-token measures
(entropy, JSD, top-k overlap) are :mod:`shiftkit.logprobs`'. Nothing here reads a config object or
``self``; every function returns plain tensors or ``(loss, metrics)``.

Shapes: ``B`` rows (completions), ``T`` completion tokens, ``K`` candidates per position, ``V`` vocabulary.
"""

from __future__ import annotations

import torch

from shiftkit import advantages, logprobs
from shiftkit.errors import ShiftkitError
# the per-token measures on full logits live in shiftkit.logprobs; these names are what opd.diagnostics calls
from shiftkit.logprobs import entropy_from_logits, jsd_from_logits  # noqa: F401
from shiftkit.logprobs import topk_overlap_from_logits as topk_overlap  # noqa: F401

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


PPO_LOG_RATIO_CLAMP = 20.0  # clip_dual (verl's vanilla PPO loss): the log-ratio is clamped to [-20, 20] before exp


def ppo_clip(clip_low: float = 0.0, clip_high: float = 0.0, clip_dual: float = 0.0) -> dict:
    """The loops' config keys ``clip_low`` / ``clip_high`` / ``clip_dual`` as the keyword arguments of
    :func:`policy_loss` (and :func:`candidate_policy_loss`, :func:`direct_opd_full_vocab_loss`): the one
    rule every command shares (``shiftkit rl``, ``opd``, ``agent train``).

    ``0`` means off, never "a clip at ratio 1": ``clip_low=0`` leaves the lower side unbounded,
    ``clip_high=0`` is the same as ``clip_low`` (so both 0 is no clipping, the REINFORCE surrogate),
    ``clip_dual=0`` is no dual clip. Negative values, and a dual clip at or below 1, are errors.
    """
    if clip_low < 0 or clip_high < 0:
        raise ShiftkitError(f"clip_low and clip_high must be >= 0 (0 = off), got {clip_low} and {clip_high}")
    if clip_dual and clip_dual <= 1.0:
        raise ShiftkitError(f"clip_dual must be > 1 (verl's clip_ratio_c, e.g. 3) or 0 (off), got {clip_dual}")
    return {"clip_low": clip_low or None, "clip_high": (clip_high or clip_low) or None, "clip_dual": clip_dual or None}


def _clipped_surrogate(ratio: torch.Tensor, adv: torch.Tensor, clip_low: float | None, clip_high: float | None,
                       clip_dual: float | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A)``, where the clipped term won, and
    where the dual clip won.

    ``clip_high=None`` means "same as ``clip_low``"; ``clip_low=None`` leaves the lower side unbounded,
    so ``clip_low=None, clip_high=h`` clips the ratio above only; both ``None``: no clipping.
    ``clip_dual=c`` (dual-clip PPO, arXiv 1912.09729; verl's ``clip_ratio_c``): where ``A < 0`` the
    surrogate is at least ``c * A``, so the loss of a token whose ratio has grown far above 1 is capped at
    ``-c * A`` (and its gradient is 0 there).
    """
    pg1 = ratio * adv
    hi = clip_low if clip_high is None else clip_high
    none = torch.zeros_like(pg1, dtype=torch.bool)
    if clip_low is None and hi is None:
        s, clipped = pg1, none
    else:
        pg2 = ratio.clamp(None if clip_low is None else 1.0 - clip_low, None if hi is None else 1.0 + hi) * adv
        s, clipped = torch.minimum(pg1, pg2), pg2 < pg1
    if clip_dual is None:
        return s, clipped, none
    pg3 = clip_dual * adv
    dual = (adv < 0) & (pg3 > s)
    return torch.where(dual, pg3, s), clipped, dual


def candidate_policy_loss(
    logp_BTK: torch.Tensor,
    old_logp_BTK: torch.Tensor,
    adv_BTK: torch.Tensor,
    mask_BT: torch.Tensor,
    *,
    clip_low: float | None = None,
    clip_high: float | None = None,
    clip_dual: float | None = None,
    aggregation: str = "token_mean",
    num_tokens=None,
    num_seqs=None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The one PPO surrogate, over K candidates per position: the clipped surrogate of each candidate,
    **summed over K**, then aggregated over valid positions (official 3-D branch of verl's vanilla PPO
    loss; Direct-OPD's ``student_topk``/``full_vocab``). :func:`policy_loss` is its K = 1 case. At
    ratio 1 the gradient is ``-sum_k A_k grad logp_k / N``. ``adv_BTK`` is treated as a constant.

    ``clip_dual`` (see :func:`_clipped_surrogate`) is verl's vanilla PPO loss exactly: the dual clip on
    negative advantages, and the log-ratio clamped to ``[-20, 20]`` before ``exp`` (verl's
    ``compute_policy_loss_vanilla``). Without it the log-ratio is not clamped. Metrics: ``clip_frac``
    (the ratio clip won), ``dual_clip_frac`` (the dual clip won), ``ratio_mean``.
    """
    valid_BT1 = mask_BT.bool().unsqueeze(-1)
    valid_BTK = valid_BT1.expand_as(logp_BTK)
    log_ratio_BTK = torch.where(valid_BTK, logp_BTK - old_logp_BTK.detach(), torch.zeros_like(logp_BTK))
    if clip_dual is not None:
        log_ratio_BTK = log_ratio_BTK.clamp(-PPO_LOG_RATIO_CLAMP, PPO_LOG_RATIO_CLAMP)
    ratio_BTK = torch.exp(log_ratio_BTK)
    adv_BTK = torch.where(valid_BTK, adv_BTK.detach(), torch.zeros_like(adv_BTK))
    surrogate_BTK, clipped_BTK, dual_BTK = _clipped_surrogate(ratio_BTK, adv_BTK, clip_low, clip_high, clip_dual)
    loss = aggregate(-surrogate_BTK.sum(-1), mask_BT, aggregation, num_tokens, num_seqs)
    m = mask_BT.bool()
    metrics = {
        "clip_frac": masked_mean(clipped_BTK.float().mean(-1), m).detach(),
        "dual_clip_frac": masked_mean(dual_BTK.float().mean(-1), m).detach(),
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
    clip_dual: float | None = None,
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
    ``-A_t * grad logp_t`` at ratio 1). ``clip_dual``: verl's dual clip (:func:`candidate_policy_loss`).
    The loops' keys become these arguments by one rule, :func:`ppo_clip` (0 = off).
    """
    return candidate_policy_loss(logp_BT.unsqueeze(-1), old_logp_BT.unsqueeze(-1), adv_BT.unsqueeze(-1), mask_BT,
                                 clip_low=clip_low, clip_high=clip_high, clip_dual=clip_dual, aggregation=aggregation,
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


# ---- Direct-OPD over the whole vocabulary, chunk by chunk (no [B, T, V]) ----

def position_weights(mask_BT: torch.Tensor, aggregation: str = "token_mean", num_tokens=None,
                     num_seqs=None) -> torch.Tensor:
    """Per-position weights ``[B, T]`` with ``sum(w * loss_BT) == losses.aggregate(loss_BT, mask, ...)``.

    ``token_mean``: ``1 / N_tokens`` on valid positions; ``seq_mean``: ``1 / (n_valid(row) * N_seqs)``.
    ``num_tokens`` / ``num_seqs`` are the global counts, as in :func:`shiftkit.losses.aggregate`.
    """
    m_BT = mask_BT.bool()
    if aggregation == "token_mean":
        n = m_BT.float().sum() if num_tokens is None else torch.as_tensor(num_tokens, dtype=torch.float32)
        return m_BT.float() / n.clamp(min=1.0).to(m_BT.device)
    if aggregation == "seq_mean":
        per_row_B = m_BT.float().sum(-1)
        n = (per_row_B > 0).float().sum() if num_seqs is None else torch.as_tensor(float(num_seqs))
        return m_BT.float() / per_row_B.clamp(min=1.0)[:, None] / n.clamp(min=1.0).to(m_BT.device)
    raise ValueError(f"unknown aggregation '{aggregation}' (use one of {', '.join(AGGREGATIONS)})")


def direct_opd_full_vocab_loss(
    student: logprobs.Head,
    teacher: logprobs.Head,
    ref: logprobs.Head,
    mask_BT: torch.Tensor,
    *,
    old: logprobs.Head | None = None,
    keep_BT: torch.Tensor | None = None,
    scale: float = 1.0,
    clip: float = 0.0,
    clip_low: float | None = None,
    clip_high: float | None = None,
    clip_dual: float | None = None,
    aggregation: str = "token_mean",
    num_tokens=None,
    num_seqs=None,
    chunk: int | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Direct-OPD ``full_vocab``: the candidate PPO surrogate over every token, chunk by chunk.

    Per chunk: ``adv, w, delta = advantages.direct_opd_candidates(student_logp, teacher_logp, ref_logp)``
    with all ``V`` ids as candidates (what ``advantages.direct_opd_full_vocab`` does on full
    logits), then :func:`shiftkit.losses.candidate_policy_loss`. The result equals the unchunked
    ``candidate_policy_loss(student_logp_BTV, old_logp_BTV, adv_BTV, mask, ...)``:
    the surrogate is positively homogeneous in the advantage, so each position's aggregation
    weight (:func:`position_weights`) is folded into its advantage and the chunk losses add up.

    ``old``: the old policy's head (off-policy: its probabilities weight Delta and its log-probs
    are the ratio's denominator); default on-policy (the student's own detached log-probs, ratio 1).
    ``keep_BT``: a position mask on the reward (S2D-OPD ``top_q``), like ``adv * keep`` in the loop.
    Returns ``(loss, stats)``; ``stats`` (detached, ``[B, T]``, 0 at padding): ``reward`` =
    ``sum_v adv`` (the adaptive-KL signal), ``delta_sum``, ``delta_sq_sum``, ``delta_pos`` (counts).
    """
    wpos_BT = position_weights(mask_BT, aggregation, num_tokens, num_seqs)
    valid_BT = mask_BT.bool()
    keep_BT = valid_BT if keep_BT is None else (keep_BT.bool() & valid_BT)
    heads = [student, teacher.detach(), ref.detach()] + ([old.detach()] if old is not None else [])

    def fn(lg, ex):
        w_C, m_C, keep_C = ex
        s_lp = lg[0].log_softmax(-1)
        base_lp = (lg[3].log_softmax(-1) if len(lg) > 3 else s_lp).detach()
        adv, _, delta = advantages.direct_opd_candidates(base_lp, lg[1].log_softmax(-1), lg[2].log_softmax(-1),
                                                     scale=scale, clip=clip)
        m_C1 = m_C[:, None]  # each position is one "row" of length 1; its weight is in the advantage
        adv = adv * keep_C[:, None]  # the top-q position mask, as the loop's adv * keep
        loss, _ = candidate_policy_loss(s_lp[:, None], base_lp[:, None], (adv * w_C[:, None])[:, None], m_C1,
                                               clip_low=clip_low, clip_high=clip_high, clip_dual=clip_dual,
                                               aggregation="token_mean", num_tokens=1.0)
        C = m_C.shape[0]
        d = delta.detach() * m_C1.to(delta.dtype)
        # the chunk's scalar loss, spread evenly over its C positions so that concatenating and summing adds it up
        return (loss.expand(C) / max(C, 1), (adv.detach() * m_C1).sum(-1), d.sum(-1), (d * d).sum(-1),
                ((delta.detach() > 0) & m_C1).float().sum(-1))

    share_BT, *rest = logprobs.map_chunks(fn, heads, [wpos_BT, valid_BT, keep_BT], chunk)
    return share_BT.sum(), dict(zip(("reward", "delta_sum", "delta_sq_sum", "delta_pos"), rest))
