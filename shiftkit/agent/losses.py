"""Pure tensor functions for multi-turn PPO: GAE over model-generated tokens, the clipped value loss,
explained variance, and the token-reward layout. The policy side reuses
:func:`shiftkit.losses.policy_loss` (the shared per-token-advantage surrogate) unchanged.

Masks: ``mask_BT`` is 1 on tokens the model generated (assistant turns) and 0 on prompt, tool output
and padding. The agent's MDP has a step only at generated tokens; a tool's output is part of the
environment transition between two generated tokens, so GAE skips masked positions: the "next value"
of the last token of a turn is the value at the first token of the next turn.
"""

from __future__ import annotations

import torch

from shiftkit.losses import aggregate, masked_mean


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


def whiten(adv_BT: torch.Tensor, mask_BT: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Normalise advantages to zero mean, unit variance over masked tokens (0 elsewhere)."""
    m = mask_BT.bool()
    mu = masked_mean(adv_BT, m)
    var = masked_mean((adv_BT - mu).pow(2), m)
    return torch.where(m, (adv_BT - mu) / (var.sqrt() + eps), torch.zeros_like(adv_BT))
