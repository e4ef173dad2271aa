"""What the OPD loop logs about its signal each step, and its collapse guard (pure functions).

:func:`opd_diagnostics` summarises the shaped reward, the entropies of student/teacher/reference, how
much of the student's mass its top-K holds, and the teacher/reference top-K overlaps with the
student; :func:`collapsed` is the collapse guard's per-step predicate.
"""

from __future__ import annotations

import torch

from shiftkit import losses


@torch.no_grad()
def opd_diagnostics(delta_BTK: torch.Tensor, mask_BT: torch.Tensor, student_BTV: torch.Tensor,
                    teacher_BTV: torch.Tensor, ref_BTV: torch.Tensor | None, jsd_BT: torch.Tensor | None,
                    k: int) -> dict[str, float]:
    """Flat metrics of one batch (``ref_BTV``/``jsd_BT`` None for vanilla OPD: no ``ref`` keys)."""
    m = mask_BT.bool()
    dvals = delta_BTK[m.unsqueeze(-1).expand_as(delta_BTK)]
    s_ent = losses.masked_mean(losses.entropy_from_logits(student_BTV), m)
    topk_mass = losses.masked_mean(student_BTV.softmax(-1).topk(min(k, student_BTV.shape[-1]), -1).values.sum(-1), m)
    diag = {"delta/mean": float(dvals.mean()) if dvals.numel() else 0.0,
            "delta/std": float(dvals.std()) if dvals.numel() > 1 else 0.0,
            "delta/pos_frac": float((dvals > 0).float().mean()) if dvals.numel() else 0.0,
            "student/topk_mass": float(topk_mass), "entropy/student": float(s_ent),
            "entropy/teacher": float(losses.masked_mean(losses.entropy_from_logits(teacher_BTV), m)),
            "overlap/teacher_student": float(losses.masked_mean(losses.topk_overlap(teacher_BTV, student_BTV, k), m))}
    if ref_BTV is not None:
        e_ref = float(losses.masked_mean(losses.entropy_from_logits(ref_BTV), m))
        diag.update({"entropy/ref": e_ref, "entropy/teacher_minus_ref": diag["entropy/teacher"] - e_ref,
                     "overlap/ref_student": float(losses.masked_mean(losses.topk_overlap(ref_BTV, student_BTV, k), m)),
                     "jsd/teacher_ref": float(losses.masked_mean(jsd_BT, m))})
    return diag


def collapsed(eos_rate: float, resp_len: float, first_len: float, min_eos_rate: float, min_len_frac: float) -> bool:
    """The student stopped terminating properly: too few rows end at EOS, or responses shrank below
    ``min_len_frac`` of the stage's first-step length (global quantities: every rank decides the same)."""
    return eos_rate < min_eos_rate or resp_len < min_len_frac * first_len
