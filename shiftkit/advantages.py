"""Credit assignment: rewards and teachers -> per-token advantages, as pure tensor functions.

What to reinforce lives here; how an advantage becomes a gradient lives in :mod:`shiftkit.losses`
(:func:`~shiftkit.losses.policy_loss`). Nothing here reads a config object; every function takes
tensors (or, for the Direct-OPD signal, the models' chunked heads) and scalars and returns tensors
(advantages are detached).

* **GRPO**: :func:`group_advantages` (reward minus its group mean, optionally over the group std).
* **Agentic PPO** (CUDA Agent): :func:`terminal_rewards`, :func:`gae` over generated tokens only, :func:`whiten`.
* **Direct-OPD** (arXiv 2607.05394): a weak model's RL shift as a dense per-token reward
  ``Delta(v | s_t) = log pi_teacher(v | s_t) - log pi_ref(v | s_t)`` (post-RL minus pre-RL) at states
  the *student* visits, over candidates ``v`` (the sampled token, the student's top-K, or the whole
  vocabulary); advantage ``sg[w(v) * Delta(v)]`` with ``w`` the student's probabilities renormalised
  over the candidates (:func:`direct_opd_sampled`, :func:`direct_opd_candidates`,
  :func:`direct_opd_full_vocab`) and the S^2D top-q mask :func:`topq_position_mask`.
  :func:`direct_opd_signal` assembles them for one micro-batch from the models' chunked heads; it is
  the signal every trainer uses (the native loop and the TRL integration). The sign-based KL
  controller :func:`adaptive_kl_coef`; the GRPO outcome mix :func:`with_outcome_advantage`.
* **Vanilla OPD**: :func:`vanilla_opd_advantage` (per-token reverse KL to the teacher as a reward).

Shapes: ``B`` rows, ``T`` completion tokens, ``P`` prompts, ``G`` group size, ``K`` candidates per
position, ``V`` vocabulary; lower-case ``b``, ``t``, ``k`` for one micro-batch's slice.
"""

from __future__ import annotations

import dataclasses

import torch

from shiftkit import logprobs


# ---- GRPO ----

def group_advantages(rewards_B: torch.Tensor, group_size: int, scale: str = "std", eps: float = 1e-6) -> torch.Tensor:
    """GRPO advantages: reward minus its group mean, optionally divided by the group std.

    Rows ``[g*G:(g+1)*G]`` form group (prompt) ``g``. ``scale``: ``std`` (GRPO), ``none`` (Dr. GRPO).
    A group whose rewards are all equal gets advantage 0.

    A NaN reward is *unscorable* (every reward function returned ``None`` for it, :mod:`shiftkit.rewards`):
    its advantage is 0, and it is left out of its group's mean and std, so it gives no advantage to
    the others either (``[1, 1, 1, None]`` has no signal). Groups without a NaN are computed exactly as
    without this rule.
    """
    if rewards_B.numel() % group_size:
        raise ValueError(f"{rewards_B.numel()} rewards do not split into groups of {group_size}")
    if scale not in ("std", "none"):
        raise ValueError(f"unknown advantage scale '{scale}' (use std or none)")
    r_PG = rewards_B.float().view(-1, group_size)
    known_PG = ~torch.isnan(r_PG)
    r0_PG = torch.where(known_PG, r_PG, torch.zeros_like(r_PG))
    adv_PG = r0_PG - r0_PG.mean(-1, keepdim=True)
    if scale == "std":
        std_P1 = r0_PG.std(-1, unbiased=True, keepdim=True) if group_size > 1 else torch.ones_like(r_PG[:, :1])
        adv_PG = adv_PG / (std_P1 + eps)
    partial_P = ~known_PG.all(-1)
    if partial_P.any():  # groups with an unscorable row: mean and (unbiased) std over the scorable rows only
        n_P1 = known_PG.sum(-1, keepdim=True).float()
        dev_PG = torch.where(known_PG, r0_PG - r0_PG.sum(-1, keepdim=True) / n_P1.clamp(min=1), torch.zeros_like(r_PG))
        if scale == "std":
            std_P1 = (dev_PG.pow(2).sum(-1, keepdim=True) / (n_P1 - 1).clamp(min=1)).sqrt()
            dev_PG = dev_PG / (std_P1 + eps)
        adv_PG = torch.where(partial_P[:, None], dev_PG, adv_PG)
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


def whiten(adv_BT: torch.Tensor, mask_BT: torch.Tensor, eps: float = 1e-8, unbiased: bool = False,
           d=None) -> torch.Tensor:
    """Normalise advantages to zero mean, unit variance over masked tokens (0 elsewhere).

    ``unbiased=False`` (the default): ``(A - mean) / (sqrt(var) + eps)`` with the biased variance
    (divided by n). ``unbiased=True`` is verl's ``masked_whiten`` (``verl/utils/torch_functional.py``,
    which ``compute_gae_advantage_return`` in ``verl/trainer/ppo/core_algos.py`` applies): the
    Bessel-corrected variance (divided by n - 1) and ``(A - mean) * rsqrt(var + eps)``. The two differ by
    the factor ``sqrt((n - 1) / n)`` (0.5% at n = 100 tokens, nothing at the batch sizes that matter).
    ``d`` (a :class:`shiftkit.dist.Dist`): the mean and variance over every rank's tokens, as one process would.
    """
    m = mask_BT.bool()
    tot = (lambda x: x) if d is None or d.world == 1 else (lambda x: d.sum(x).to(adv_BT.device, torch.float32))
    n = tot(m.float().sum()).clamp(min=1.0)
    mu = tot(torch.where(m, adv_BT, torch.zeros_like(adv_BT)).sum()) / n
    var = tot(torch.where(m, (adv_BT - mu).pow(2), torch.zeros_like(adv_BT)).sum()) / n
    if unbiased:
        scaled = (adv_BT - mu) * torch.rsqrt(var * n / (n - 1).clamp(min=1.0) + eps)
    else:
        scaled = (adv_BT - mu) / (var.sqrt() + eps)
    return torch.where(m, scaled, torch.zeros_like(adv_BT))


# ---- Direct-OPD and vanilla OPD ----

OPD_REWARD_MODES = ("sampled", "student_topk", "full_vocab")


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


def delta_moments(delta_BTK: torch.Tensor, mask_BT: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``(n, sum, sum of squares, count > 0)`` of ``delta`` over valid positions and every candidate."""
    m = mask_BT.bool().unsqueeze(-1).expand_as(delta_BTK)
    v = delta_BTK.float()[m]
    return torch.tensor(float(v.numel())), v.sum(), (v * v).sum(), (v > 0).float().sum()


@dataclasses.dataclass
class OPDSignal:
    """One micro-batch's per-token OPD signal (the candidates' axis ``k``, never ``V``)."""

    ids_btk: torch.Tensor | None  # candidate ids (None in full_vocab: every token is one)
    adv_btk: torch.Tensor | None  # sg[w * Delta] (vanilla: -(log pi_s - log pi_t)), top_q applied; None in full_vocab
    student_lp_btk: torch.Tensor | None  # the student's log-probs at the candidates (the old policy's, off-policy)
    keep_bt: torch.Tensor | None  # the top_q position mask (None: top_q = 1)
    reward_bt: torch.Tensor  # sum_k adv per position (the adaptive-KL signal)
    delta_mean_bt: torch.Tensor  # the shaped Delta averaged over the candidates, per position
    moments: tuple  # (n, sum, sum of squares, count > 0) of Delta over (valid position, candidate)


@torch.no_grad()
def direct_opd_signal(student: logprobs.Head, teacher: logprobs.Head, ref: logprobs.Head | None,
                      completion_ids_bt: torch.Tensor, mask_bt: torch.Tensor, *, mode: str = "student_topk",
                      k: int = 16, scale: float = 1.0, clip: float = 0.0, top_q: float = 1.0,
                      jsd_bt: torch.Tensor | None = None, chunk: int | None = None) -> OPDSignal:
    """The Direct-OPD signal of one micro-batch from the three models' heads (:mod:`shiftkit.logprobs`,
    chunked: no ``[b, t, V]`` tensor), the one assembly every trainer calls (``opd/loop.py``,
    ``integrations/trl.py``).

    ``mode`` picks the candidates: the sampled token (``sampled``: ``A = Delta``), the student's
    top-``k`` (``student_topk``: ``A = sg[w * Delta]``, :func:`direct_opd_candidates`) or the whole
    vocabulary (``full_vocab``: no ids or advantages are returned, the loss rebuilds them chunk by chunk,
    :func:`shiftkit.losses.direct_opd_full_vocab_loss`; only the reward statistics are). ``ref=None`` is
    vanilla OPD (:func:`vanilla_opd_advantage`, ``sampled`` only). ``top_q < 1`` keeps the reward only at
    the top-q positions by the teacher/reference JSD (``jsd_bt``, computed here when not given).
    """
    if ref is None and mode != "sampled":
        raise ValueError(f"vanilla OPD (no reference) scores the sampled token only, not mode '{mode}'")
    keep_bt = None
    if top_q < 1:
        score_bt = jsd_bt if jsd_bt is not None else logprobs.jsd(teacher, ref, chunk)
        keep_bt = topq_position_mask(score_bt, mask_bt, top_q)
    if mode == "full_vocab":
        return _full_vocab_signal(student, teacher, ref, mask_bt, keep_bt, scale, clip, chunk)
    if mode == "sampled":
        ids_btk = completion_ids_bt.unsqueeze(-1)
        s_lp = logprobs.gather_logprobs(student, ids_btk, chunk)
    elif mode == "student_topk":  # the top-K ids and their log-probs in one pass
        ids_btk, s_lp = logprobs.student_topk(student, k, chunk)
    else:
        raise ValueError(f"unknown Direct-OPD reward mode '{mode}' (use one of {', '.join(OPD_REWARD_MODES)})")
    t_lp = logprobs.gather_logprobs(teacher, ids_btk, chunk)
    if ref is None:
        adv = delta = vanilla_opd_advantage(s_lp, t_lp, scale=scale)
    elif mode == "sampled":
        adv = delta = direct_opd_sampled(t_lp, logprobs.gather_logprobs(ref, ids_btk, chunk), scale=scale, clip=clip)
    else:
        adv, _, delta = direct_opd_candidates(s_lp, t_lp, logprobs.gather_logprobs(ref, ids_btk, chunk), scale=scale,
                                              clip=clip)
    if keep_bt is not None:
        adv = adv * keep_bt.unsqueeze(-1)
    return OPDSignal(ids_btk, adv, s_lp, keep_bt, adv.sum(-1), delta.float().mean(-1), delta_moments(delta, mask_bt))


def _full_vocab_signal(student, teacher, ref, mask_bt, keep_bt, scale, clip, chunk) -> OPDSignal:
    """``full_vocab``: the reward statistics of every (position, token) pair, chunk by chunk."""
    valid_bt = mask_bt.bool()
    keep_bt_ = valid_bt if keep_bt is None else (keep_bt.bool() & valid_bt)

    def fn(lg, ex):
        m_C1, keep_C1 = ex[0][:, None], ex[1][:, None]
        adv, _, delta = direct_opd_candidates(lg[0].log_softmax(-1), lg[1].log_softmax(-1), lg[2].log_softmax(-1),
                                              scale=scale, clip=clip)
        d = delta * m_C1.to(delta.dtype)
        return (adv * keep_C1 * m_C1).sum(-1), d.sum(-1), (d * d).sum(-1), ((delta > 0) & m_C1).float().sum(-1)

    reward_bt, d_sum, d_sq, d_pos = logprobs.map_chunks(fn, [student, teacher, ref], [valid_bt, keep_bt_], chunk)
    V = student.vocab
    moments = (float(valid_bt.sum()) * V, d_sum[valid_bt].double().sum(), d_sq[valid_bt].double().sum(),
               d_pos[valid_bt].double().sum())
    return OPDSignal(None, None, None, keep_bt, reward_bt, d_sum / V, moments)


def adaptive_kl_coef(alpha: float, reward_mean: float, eps: float = 0.01, alpha_min: float = 0.5,
                     alpha_max: float = 2.5) -> float:
    """Official sign-based controller: ``alpha * (1 +- eps)`` when the weighted mean reward is
    positive / negative (unchanged at exactly 0), then clipped to ``[alpha_min, alpha_max]``."""
    if reward_mean > 0:
        alpha = alpha * (1 + eps)
    elif reward_mean < 0:
        alpha = alpha * (1 - eps)
    return float(min(alpha_max, max(alpha_min, alpha)))
