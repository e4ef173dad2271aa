"""What the OPD loop logs about its signal each step, and its collapse guard (pure functions).

:func:`opd_diagnostics` summarises the shaped reward, the entropies of student/teacher/reference, how
much of the student's mass its top-K holds, and the teacher/reference top-K overlaps with the
student; :func:`collapsed` is the collapse guard's per-step predicate.
"""

from __future__ import annotations

import torch

from shiftkit import losses


POSITION_STATS = ("entropy/student", "entropy/teacher", "student/topk_mass", "overlap/teacher_student",
                  "entropy/ref", "overlap/ref_student", "jsd/teacher_ref")


def position_stats(student_CV: torch.Tensor, teacher_CV: torch.Tensor, ref_CV: torch.Tensor | None,
                   k: int) -> tuple[torch.Tensor, ...]:
    """Per-position diagnostics of a chunk of logits ``[C, V]`` (student at its temperature), in
    :data:`POSITION_STATS` order (the last three only with a reference); each ``[C]``, no grad."""
    with torch.no_grad():
        out = [losses.entropy_from_logits(student_CV), losses.entropy_from_logits(teacher_CV),
               student_CV.float().softmax(-1).topk(min(k, student_CV.shape[-1]), -1).values.sum(-1),
               losses.topk_overlap(teacher_CV, student_CV, k)]
        if ref_CV is not None:
            out += [losses.entropy_from_logits(ref_CV), losses.topk_overlap(ref_CV, student_CV, k),
                    losses.jsd_from_logits(teacher_CV, ref_CV)]
        return tuple(out)


@torch.no_grad()
def opd_diagnostics(delta_moments: tuple, pos_BT: dict[str, torch.Tensor], mask_BT: torch.Tensor) -> dict[str, float]:
    """Flat metrics of one batch from the shaped reward's moments over every (position, candidate)
    pair -- ``(n, sum, sum of squares, number > 0)`` -- and the :func:`position_stats` maps (``[B, T]``
    each; no ``ref`` keys for vanilla OPD)."""
    n, s1, s2, pos = (float(x) for x in delta_moments)
    mean = s1 / n if n else 0.0
    var = (s2 - n * mean * mean) / (n - 1) if n > 1 else 0.0
    m = mask_BT.bool()
    diag = {"delta/mean": mean, "delta/std": max(var, 0.0) ** 0.5, "delta/pos_frac": pos / n if n else 0.0}
    diag.update({k: float(losses.masked_mean(v, m)) for k, v in pos_BT.items()})
    if "entropy/ref" in diag:
        diag["entropy/teacher_minus_ref"] = diag["entropy/teacher"] - diag["entropy/ref"]
    return diag


def delta_moments(delta_BTK: torch.Tensor, mask_BT: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``(n, sum, sum of squares, count > 0)`` of ``delta`` over valid positions and every candidate."""
    m = mask_BT.bool().unsqueeze(-1).expand_as(delta_BTK)
    v = delta_BTK.float()[m]
    return torch.tensor(float(v.numel())), v.sum(), (v * v).sum(), (v > 0).float().sum()


def collapsed(eos_rate: float, resp_len: float, first_len: float, min_eos_rate: float, min_len_frac: float) -> bool:
    """The student stopped terminating properly: too few rows end at EOS, or responses shrank below
    ``min_len_frac`` of the stage's first-step length (global quantities: every rank decides the same)."""
    return eos_rate < min_eos_rate or resp_len < min_len_frac * first_len
