"""What the OPD loop logs about its signal each step, and its collapse guard (pure functions).

:func:`opd_diagnostics` summarises the shaped reward, the entropies of student/teacher/reference, how
much of the student's mass its top-K holds, and the teacher/reference top-K overlaps with the
student; :func:`collapsed` is the collapse guard's per-step predicate.

:func:`shift_anatomy` splits the teacher pair's shift on the student's own samples by token class
(end of sequence, format, content): a pair whose shift is mostly "when to stop" or "how to lay the
answer out" transfers that, not the task skill (the preflight warns, :func:`shift_dominated_by`).
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


TOKEN_CLASSES = ("content", "format", "eos")  # the class ids of :func:`token_class_table`, in order


def token_class_table(tok, vocab_size: int, eos_ids=()) -> torch.Tensor:
    """``[V]`` class id per token: 2 = end of sequence (``eos_ids`` and the tokenizer's EOS), 1 = format
    (special tokens, and tokens whose text has no letter or digit: whitespace, newlines, punctuation,
    markup), 0 = content. Ids past the tokenizer (padded output rows) count as format."""
    n = min(len(tok), vocab_size)
    texts = tok.batch_decode([[i] for i in range(n)])
    cls = [0 if any(ch.isalnum() for ch in t) else 1 for t in texts] + [1] * (vocab_size - n)
    for i in getattr(tok, "all_special_ids", []):
        if 0 <= i < vocab_size:
            cls[i] = 1
    for i in {*eos_ids, getattr(tok, "eos_token_id", None)} - {None}:
        if 0 <= i < vocab_size:
            cls[i] = 2
    return torch.tensor(cls, dtype=torch.long)


@torch.no_grad()
def shift_anatomy(delta_BTK: torch.Tensor, weight_BTK: torch.Tensor, ids_BTK: torch.Tensor, mask_BT: torch.Tensor,
                  class_V: torch.Tensor) -> dict[str, float]:
    """Which tokens the Direct-OPD signal pushes up and down, by token class.

    ``delta_BTK``: ``log pi_teacher - log pi_ref`` at the candidates ``ids_BTK`` (the student's top-K);
    ``weight_BTK``: the student's probabilities renormalised over them; ``class_V``:
    :func:`token_class_table`. The push on candidate v is ``w(v) * (Delta(v) - sum_u w(u) Delta(u))``:
    the gradient of the top-K surrogate on v's logit (a Delta shared by every candidate, e.g. the
    teacher's normaliser moving, pushes nothing; the sampled mode's update has the same expectation).
    Its positive part is what the shift makes likelier, its negative part what it makes rarer, each
    summing to the same total. Returns ``up/<c>`` and ``down/<c>`` (class c's share of each part, for
    c in :data:`TOKEN_CLASSES`; 0 without any push), ``<c>_share`` = the shares on the side where EOS +
    format weigh more (a partition: they sum to 1 when anything is pushed), ``<c>_delta`` = the
    w-weighted mean Delta of class c's candidates, and ``mass`` = mean sum_k |push| per valid position.
    """
    m_BTK = mask_BT.bool().unsqueeze(-1).expand_as(delta_BTK)
    w = weight_BTK.float() * m_BTK
    d = delta_BTK.float()
    if d.shape[-1] > 1:
        d = d - (w * d).sum(-1, keepdim=True) / w.sum(-1, keepdim=True).clamp_min(1e-30)
    push = w * d
    cls_BTK = class_V.to(ids_BTK.device)[ids_BTK]
    up, down = push.clamp(min=0), (-push).clamp(min=0)
    out: dict[str, float] = {}
    for side, part in (("up", up), ("down", down)):
        tot = part.sum()
        for i, c in enumerate(TOKEN_CLASSES):
            out[f"{side}/{c}"] = float(part[cls_BTK == i].sum() / tot) if tot > 0 else 0.0
    side = max(("up", "down"), key=lambda s_: out[f"{s_}/eos"] + out[f"{s_}/format"])
    for i, c in enumerate(TOKEN_CLASSES):
        out[f"{c}_share"] = out[f"{side}/{c}"]
        sel = cls_BTK == i
        w_c = w[sel].sum()
        out[f"{c}_delta"] = float((w[sel] * delta_BTK.float()[sel]).sum() / w_c) if w_c > 0 else 0.0
    out["side"] = side
    n_pos = mask_BT.bool().sum()
    out["mass"] = float(push.abs().sum() / n_pos) if n_pos > 0 else 0.0
    return out


def shift_dominated_by(anatomy: dict[str, float], threshold: float = 0.5) -> str | None:
    """``"end-of-sequence"`` or ``"format"`` when EOS and format tokens together take at least
    ``threshold`` of what the shift pushes up, or of what it pushes down (named by the larger of the
    two), else None."""
    eos, fmt = anatomy["eos_share"], anatomy["format_share"]
    if eos + fmt < threshold:
        return None
    return "end-of-sequence" if eos >= fmt else "format"
