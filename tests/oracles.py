"""Unchunked references ("oracles") of what the library computes in chunks: the Direct-OPD signal on
full ``[B, T, V]`` logits. The library's one implementation is :func:`shiftkit.advantages.direct_opd_signal`
(per micro-batch, on chunked heads); tests check it, and the trainers that call it, against these."""

import torch

from shiftkit import advantages
from shiftkit.logprobs import jsd_from_logits, logprobs_from_logits, topk_from_logits


def opd_candidates(mode: str, student_logits_BTV: torch.Tensor, completion_ids_BT: torch.Tensor, k: int) -> torch.Tensor:
    """Candidate ids ``[B,T,K]`` of a Direct-OPD ``mode``: the sampled token (``sampled``, K=1), the
    student's top-``k`` (``student_topk``) or the whole vocabulary (``full_vocab``, K=V)."""
    if mode == "sampled":
        return completion_ids_BT.unsqueeze(-1)
    if mode == "student_topk":
        return topk_from_logits(student_logits_BTV, k)[0]
    if mode == "full_vocab":
        return torch.arange(student_logits_BTV.shape[-1]).expand(*completion_ids_BT.shape, -1)
    raise ValueError(f"unknown Direct-OPD reward mode '{mode}' (use one of {', '.join(advantages.OPD_REWARD_MODES)})")


def direct_opd(student_logits_BTV: torch.Tensor, teacher_logits_BTV: torch.Tensor, ref_logits_BTV: torch.Tensor,
               ids_BTK: torch.Tensor, mask_BT: torch.Tensor, *, mode: str, scale: float = 1.0, clip: float = 0.0,
               top_q: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The Direct-OPD signal of one batch on full logits, at candidates ``ids_BTK`` (:func:`opd_candidates`).

    ``sampled``: ``A = Delta`` at the sampled token; ``student_topk``/``full_vocab``: ``A = sg[w * Delta]``.
    ``top_q < 1`` keeps the advantage only at the top-q fraction of each row's positions by the
    teacher/reference JSD (S^2D-OPD). Returns ``(adv_BTK, delta_BTK, jsd_BT)``.
    """
    t_lp_BTK = logprobs_from_logits(teacher_logits_BTV, ids_BTK)
    r_lp_BTK = logprobs_from_logits(ref_logits_BTV, ids_BTK)
    if mode == "sampled":
        adv_BTK = advantages.direct_opd_sampled(t_lp_BTK, r_lp_BTK, scale=scale, clip=clip)
        delta_BTK = adv_BTK
    else:
        s_lp_BTK = logprobs_from_logits(student_logits_BTV, ids_BTK)
        adv_BTK, _, delta_BTK = advantages.direct_opd_candidates(s_lp_BTK, t_lp_BTK, r_lp_BTK, scale=scale, clip=clip)
    jsd_BT = jsd_from_logits(teacher_logits_BTV, ref_logits_BTV)
    if top_q < 1:
        adv_BTK = adv_BTK * advantages.topq_position_mask(jsd_BT, mask_BT, top_q).unsqueeze(-1)
    return adv_BTK, delta_BTK, jsd_BT
