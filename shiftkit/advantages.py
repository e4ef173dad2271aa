"""Credit assignment: rewards and teachers -> per-token advantages, as pure tensor functions.

What to reinforce lives here; how an advantage becomes a gradient lives in :mod:`shiftkit.losses`
(:func:`~shiftkit.losses.policy_loss`). Nothing here reads a config object; every function takes
tensors and scalars and returns tensors (advantages are detached).

* **GRPO**: :func:`group_advantages` (reward minus its group mean, optionally over the group std).
* **Agentic PPO** (CUDA Agent): :func:`terminal_rewards`, :func:`gae` over generated tokens only, :func:`whiten`.
* **Direct-OPD** (arXiv 2607.05394): a weak model's RL shift as a dense per-token reward
  ``Delta(v | s_t) = log pi_teacher(v | s_t) - log pi_ref(v | s_t)`` (post-RL minus pre-RL) at states
  the *student* visits, over candidates ``v`` (:func:`opd_candidates`: the sampled token, the student's
  top-K, or the whole vocabulary); advantage ``sg[w(v) * Delta(v)]`` with ``w`` the student's
  probabilities renormalised over the candidates (:func:`direct_opd`, which wires the three modes
  :func:`direct_opd_sampled` / :func:`direct_opd_candidates` / :func:`direct_opd_full_vocab` and the
  S^2D top-q mask :func:`topq_position_mask`); the sign-based KL controller :func:`adaptive_kl_coef`;
  the GRPO outcome mix :func:`with_outcome_advantage`.
* **Vanilla OPD**: :func:`vanilla_opd_advantage` (per-token reverse KL to the teacher as a reward).

Shapes: ``B`` rows, ``T`` completion tokens, ``P`` prompts, ``G`` group size, ``K`` candidates per
position, ``V`` vocabulary.
"""

from __future__ import annotations

import torch

from shiftkit.losses import aggregate, gather_logprobs, jsd_from_logits, masked_mean


# ---- GRPO ----

def group_advantages(rewards_B: torch.Tensor, group_size: int, scale: str = "std", eps: float = 1e-6) -> torch.Tensor:
    """GRPO advantages: reward minus its group mean, optionally divided by the group std.

    Rows ``[g*G:(g+1)*G]`` form group (prompt) ``g``. ``scale``: ``std`` (GRPO), ``none`` (Dr. GRPO).
    A group whose rewards are all equal gets advantage 0.
    """
    if rewards_B.numel() % group_size:
        raise ValueError(f"{rewards_B.numel()} rewards do not split into groups of {group_size}")
    r_PG = rewards_B.float().view(-1, group_size)
    adv_PG = r_PG - r_PG.mean(-1, keepdim=True)
    if scale == "std":
        std_P1 = r_PG.std(-1, unbiased=True, keepdim=True) if group_size > 1 else torch.ones_like(r_PG[:, :1])
        adv_PG = adv_PG / (std_P1 + eps)
    elif scale != "none":
        raise ValueError(f"unknown advantage scale '{scale}' (use std or none)")
    return adv_PG.reshape(-1)


# ---- agentic PPO: GAE over generated tokens ----
#
# Masks: ``mask_BT`` is 1 on tokens the model generated (assistant turns) and 0 on prompt, tool output
# and padding. The agent's MDP has a step only at generated tokens; a tool's output is part of the
# environment transition between two generated tokens, so GAE skips masked positions: the "next value"
# of the last token of a turn is the value at the first token of the next turn.

def terminal_rewards(rewards_B: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` token rewards: the trajectory reward on the last generated token of each row, 0 elsewhere."""
    T = mask_BT.shape[1]
    idx_B = torch.where(mask_BT.bool(), torch.arange(T, device=mask_BT.device), -1).amax(-1)
    out_BT = torch.zeros(mask_BT.shape, dtype=torch.float32, device=mask_BT.device)
    has_B = idx_B >= 0
    out_BT[has_B, idx_B[has_B]] = rewards_B.float()[has_B]
    return out_BT


def gae(rewards_BT: torch.Tensor, values_BT: torch.Tensor, mask_BT: torch.Tensor, gamma: float = 1.0,
        lam: float = 0.95) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over the masked-in tokens only.

    ``delta_t = r_t + gamma * V(next valid t') - V_t`` (0 after the last valid token: terminal),
    ``A_t = delta_t + gamma * lam * A_{t'}``; returns ``(advantages_BT, returns_BT = A + V)``, both 0 at
    masked positions. CUDA Agent uses gamma = 1, lam = 0.95.
    """
    B, T = mask_BT.shape
    m_BT = mask_BT.bool()
    r_BT, v_BT = rewards_BT.float(), values_BT.detach().float()
    adv_BT = torch.zeros(B, T, dtype=torch.float32, device=mask_BT.device)
    next_v_B = torch.zeros(B, device=mask_BT.device)
    next_a_B = torch.zeros(B, device=mask_BT.device)
    for t in reversed(range(T)):
        m_B = m_BT[:, t]
        delta_B = r_BT[:, t] + gamma * next_v_B - v_BT[:, t]
        a_B = delta_B + gamma * lam * next_a_B
        adv_BT[:, t] = torch.where(m_B, a_B, torch.zeros_like(a_B))
        next_v_B = torch.where(m_B, v_BT[:, t], next_v_B)
        next_a_B = torch.where(m_B, a_B, next_a_B)
    ret_BT = torch.where(m_BT, adv_BT + v_BT, torch.zeros_like(adv_BT))
    return adv_BT, ret_BT


def whiten(adv_BT: torch.Tensor, mask_BT: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Normalise advantages to zero mean, unit variance over masked tokens (0 elsewhere)."""
    m = mask_BT.bool()
    mu = masked_mean(adv_BT, m)
    var = masked_mean((adv_BT - mu).pow(2), m)
    return torch.where(m, (adv_BT - mu) / (var.sqrt() + eps), torch.zeros_like(adv_BT))


# ---- Direct-OPD and vanilla OPD ----

OPD_REWARD_MODES = ("sampled", "student_topk", "full_vocab")


def opd_candidates(mode: str, student_logits_BTV: torch.Tensor, completion_ids_BT: torch.Tensor, k: int) -> torch.Tensor:
    """Candidate ids ``[B,T,K]`` of a Direct-OPD ``mode``: the sampled token (``sampled``, K=1), the
    student's top-``k`` (``student_topk``) or the whole vocabulary (``full_vocab``, K=V)."""
    if mode == "sampled":
        return completion_ids_BT.unsqueeze(-1)
    if mode == "student_topk":
        return student_topk(student_logits_BTV, k)[0]
    if mode == "full_vocab":
        return torch.arange(student_logits_BTV.shape[-1]).expand(*completion_ids_BT.shape, -1)
    raise ValueError(f"unknown Direct-OPD reward mode '{mode}' (use one of {', '.join(OPD_REWARD_MODES)})")


def direct_opd(student_logits_BTV: torch.Tensor, teacher_logits_BTV: torch.Tensor, ref_logits_BTV: torch.Tensor,
               ids_BTK: torch.Tensor, mask_BT: torch.Tensor, *, mode: str, scale: float = 1.0, clip: float = 0.0,
               top_q: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The Direct-OPD signal of one batch, at candidates ``ids_BTK`` (:func:`opd_candidates`).

    ``sampled``: ``A = Delta`` at the sampled token; ``student_topk``/``full_vocab``: ``A = sg[w * Delta]``.
    ``top_q < 1`` keeps the advantage only at the top-q fraction of each row's positions by the
    teacher/reference JSD (S^2D-OPD). Returns ``(adv_BTK, delta_BTK, jsd_BT)``; ``delta`` is the
    shaped reward (before the weights and the mask), ``jsd`` the teacher/reference divergence.
    """
    t_lp_BTK = gather_logprobs(teacher_logits_BTV, ids_BTK)
    r_lp_BTK = gather_logprobs(ref_logits_BTV, ids_BTK)
    if mode == "sampled":
        adv_BTK = direct_opd_sampled(t_lp_BTK, r_lp_BTK, scale=scale, clip=clip)
        delta_BTK = adv_BTK
    else:
        s_lp_BTK = gather_logprobs(student_logits_BTV, ids_BTK)
        adv_BTK, _, delta_BTK = direct_opd_candidates(s_lp_BTK, t_lp_BTK, r_lp_BTK, scale=scale, clip=clip)
    jsd_BT = jsd_from_logits(teacher_logits_BTV, ref_logits_BTV)
    if top_q < 1:
        adv_BTK = adv_BTK * topq_position_mask(jsd_BT, mask_BT, top_q).unsqueeze(-1)
    return adv_BTK, delta_BTK, jsd_BT


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
