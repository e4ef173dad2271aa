"""Checks before any Direct-OPD training step.

1. The teacher and its reference are different weights (else Delta = 0 everywhere).
2. Student, teacher and reference agree on the vocabulary, the special tokens (ids *and* meanings),
   the chat template and how the training prompts render to ids, and on the model's output size. A
   mismatch is an error that names the differing tokens; ``allow_tokenizer_mismatch=true`` overrides.
3. Scorer determinism: scoring the same batch twice, and one row alone vs inside the padded batch,
   agree within ``tol`` nats (Delta is a small difference of two log-probs; noise must be far below it).
4. Shift anatomy (a warning, not an error): on the student's own samples, the share of what the
   pair's signal pushes up (and down) that is end-of-sequence, format or content tokens
   (:func:`shiftkit.opd.diagnostics.shift_anatomy`). A weak model that RL taught mostly to stop (e.g. a
   pruned model repairing its own EOS) transfers exactly that; the warning names it before any step.
"""

from __future__ import annotations

import sys

import torch

from shiftkit.errors import ShiftkitError

SPECIAL_ATTRS = ("eos_token", "pad_token", "bos_token", "unk_token")


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    if sa.keys() != sb.keys():
        return False
    return all(sa[k].shape == sb[k].shape and torch.equal(sa[k], sb[k]) for k in sa)


def check_distinct(teacher, ref, teacher_path: str, ref_path: str) -> None:
    if same_weights(teacher, ref):
        raise ShiftkitError(f"teacher '{teacher_path}' and teacher_ref '{ref_path}' have identical weights, so the "
                            "Direct-OPD reward log pi_teacher - log pi_ref is 0 everywhere; pass the post-RL "
                            "teacher and its pre-RL reference")


def _special(tok) -> dict[str, tuple[str | None, int | None]]:
    return {a: (getattr(tok, a, None), getattr(tok, f"{a}_id", None)) for a in SPECIAL_ATTRS}


def tokenizer_differences(named: dict[str, tuple], prompts: list[str]) -> list[str]:
    """Differences between (model, tokenizer) pairs, each relative to the first one (e.g. the student)."""
    items = list(named.items())
    base_name, (base_model, base_tok) = items[0]
    bv = base_tok.get_vocab()
    out: list[str] = []
    for name, (model, tok) in items[1:]:
        v = tok.get_vocab()
        diff = sorted(t for t in set(bv) | set(v) if bv.get(t) != v.get(t))
        if diff:
            shown = ", ".join(f"{t!r} ({base_name} {bv.get(t)}, {name} {v.get(t)})" for t in diff[:5])
            out.append(f"{len(diff)} vocabulary entries differ between {base_name} and {name}: {shown}"
                       + (" ..." if len(diff) > 5 else ""))
        for a, val in _special(tok).items():
            if val != _special(base_tok)[a]:
                out.append(f"{a} differs: {base_name} {_special(base_tok)[a]} vs {name} {val}")
        if getattr(tok, "chat_template", None) != getattr(base_tok, "chat_template", None):
            out.append(f"chat templates differ between {base_name} and {name}")
        for p in prompts[:16]:
            a_ids = base_tok(p, add_special_tokens=False)["input_ids"]
            b_ids = tok(p, add_special_tokens=False)["input_ids"]
            if a_ids != b_ids:
                out.append(f"prompt {p[:30]!r} renders to different ids under {base_name} and {name}")
                break
        n_a, n_b = base_model.get_output_embeddings().weight.shape[0], model.get_output_embeddings().weight.shape[0]
        if n_a != n_b:
            out.append(f"output vocabulary size differs: {base_name} {n_a} vs {name} {n_b}")
    return out


def check_tokenizers(named: dict[str, tuple], prompts: list[str], allow: bool) -> list[str]:
    diffs = tokenizer_differences(named, prompts)
    if diffs and not allow:
        raise ShiftkitError("tokenizers/models disagree (Direct-OPD scores the student's token ids with every "
                            "model, so ids must mean the same thing): " + "; ".join(diffs)
                            + "; set allow_tokenizer_mismatch=true only if you know the ids agree")
    return diffs


@torch.no_grad()
def determinism_gap(scorers: dict[str, torch.nn.Module], student, tok, prompts: list[str], dtype: str,
                    max_new_tokens: int = 16) -> float:
    """Max |difference| (nats) between repeated scoring and alone-vs-padded scoring, over all scorers."""
    from shiftkit.logprobs import score  # chunked: no [B, T, V] even in the self-test
    from shiftkit.sampling import sample

    ps = prompts[:4]
    if len(ps) > 1:  # make sure padding is exercised: the longest and the shortest prompt
        ps = sorted(set(ps), key=len)
        ps = [ps[-1], ps[0], *ps[1:-1]][:4]
    roll = sample(student, tok, ps, max_new_tokens=max_new_tokens, seed=1234)
    args = (roll.prompt_ids_BP, roll.prompt_mask_BP, roll.completion_ids_BT, roll.completion_mask_BT)
    gap = 0.0
    for name, m in scorers.items():
        a = score(m, *args, dtype=dtype)
        b = score(m, *args, dtype=dtype)
        gap = max(gap, float((a - b).abs().max()))
        for i in range(len(ps)):  # each row alone, without the batch's padding
            p_mask = roll.prompt_mask_BP[i].bool()
            c_len = int(roll.completion_mask_BT[i].sum())
            alone = score(m, roll.prompt_ids_BP[i : i + 1, p_mask], roll.prompt_mask_BP[i : i + 1, p_mask],
                          roll.completion_ids_BT[i : i + 1, :c_len], roll.completion_mask_BT[i : i + 1, :c_len],
                          dtype=dtype)
            gap = max(gap, float((alone[0] - a[i, :c_len]).abs().max()) if c_len else 0.0)
    return gap


def check_determinism(scorers, student, tok, prompts, dtype: str, tol: float) -> float:
    gap = determinism_gap(scorers, student, tok, prompts, dtype)
    if gap > tol:
        raise ShiftkitError(f"scorer determinism self-test failed: scoring the same tokens twice or alone vs padded "
                            f"differs by {gap:.2e} nats > determinism_tol={tol:g} (dtype {dtype}); Delta would be "
                            "dominated by noise; use score_dtype=float32 or raise determinism_tol explicitly")
    return gap


ANATOMY_PROMPTS = 8  # prompts of the anatomy check, sampled ANATOMY_SAMPLES times each by the student
ANATOMY_SAMPLES = 2
ANATOMY_MAX_TOKENS = 1024  # the run's max_new_tokens, capped: the check must see completions end
ANATOMY_THRESHOLD = 0.5  # warn when EOS + format take at least this share of the push up (or down)


@torch.no_grad()
def shift_anatomy_of(student, tok, teacher, ref, prompts: list[str], *, top_k: int = 16, max_new_tokens: int = 256,
                     temperature: float = 1.0, top_p: float = 1.0, score_dtype: str = "float32",
                     seed: int = 4321) -> dict:
    """The pair's shift anatomy on the student's own samples (the rendered ``prompts``, each sampled
    :data:`ANATOMY_SAMPLES` times at the run's temperature), at the student's top-K candidates with
    Delta scored as the loop scores it (every reward mode: the sampled mode's update has the same
    expectation). Returns :func:`~shiftkit.opd.diagnostics.shift_anatomy` plus ``dominated_by``, the
    student's EOS rate and mean length on these samples, and what was sampled."""
    from shiftkit import advantages as A
    from shiftkit import logprobs as LP
    from shiftkit.opd.diagnostics import shift_anatomy, shift_dominated_by, token_class_table
    from shiftkit.sampling import sample

    ps = [p for p in prompts[:ANATOMY_PROMPTS] for _ in range(ANATOMY_SAMPLES)]
    mnt = min(max_new_tokens, ANATOMY_MAX_TOKENS)
    roll = sample(student, tok, ps, max_new_tokens=mnt, temperature=temperature, top_p=top_p, seed=seed)
    args = (roll.prompt_ids_BP, roll.prompt_mask_BP, roll.completion_ids_BT, roll.completion_mask_BT)
    s = LP.model_head(student, *args, dtype=score_dtype, temperature=temperature)
    ids, s_lp = LP.student_topk(s, top_k)
    t_lp = LP.gather_logprobs(LP.model_head(teacher, *args, dtype=score_dtype), ids)
    r_lp = LP.gather_logprobs(LP.model_head(ref, *args, dtype=score_dtype), ids)
    eos_ids = set()
    for c in (getattr(student, "generation_config", None), getattr(student, "config", None)):
        e = getattr(c, "eos_token_id", None)
        eos_ids |= set(e) if isinstance(e, (list, tuple)) else ({e} if e is not None else set())
    an = shift_anatomy(t_lp - r_lp, A.topk_weights(s_lp), ids, roll.completion_mask_BT,
                       token_class_table(tok, s.vocab, eos_ids))
    an["dominated_by"] = shift_dominated_by(an, ANATOMY_THRESHOLD)
    an.update({"top_k": top_k, "rollouts": len(ps), "max_new_tokens": mnt,
               "student_eos_rate": float(roll.eos_B.float().mean()),
               "student_len": float(roll.completion_mask_BT.sum(-1).float().mean())})
    return an


def anatomy_warning(an: dict) -> str | None:
    """The one-line warning for an anatomy that :func:`shift_dominated_by` flags, else None."""
    if not an.get("dominated_by"):
        return None
    what = "likelier" if an["side"] == "up" else "rarer"
    return (f"warning: the teacher pair's shift on the student's own samples is dominated by {an['dominated_by']} "
            f"tokens (of what it makes {what}: EOS {100 * an['eos_share']:.0f}%, format "
            f"{100 * an['format_share']:.0f}%, content {100 * an['content_share']:.0f}%; mean Delta at EOS "
            f"{an['eos_delta']:+.2f}). Direct-OPD would mostly transfer when to stop or how to lay out the answer, "
            "not the task skill; check that the weak model before RL already ends and formats like the student "
            "(EOS rate, length, truncation)")


def check_shift_anatomy(student, tok, teacher, ref, prompts: list[str], cfg, warn: bool = True) -> dict:
    """:func:`shift_anatomy_of` with the run's settings (``cfg``: an OPD stage config); prints
    :func:`anatomy_warning` to stderr when the shift is dominated by EOS or format tokens."""
    an = shift_anatomy_of(student, tok, teacher, ref, prompts, top_k=cfg.top_k, max_new_tokens=cfg.max_new_tokens,
                          temperature=cfg.temperature, top_p=cfg.top_p, score_dtype=cfg.score_dtype)
    msg = anatomy_warning(an)
    if msg and warn:
        print(msg, file=sys.stderr, flush=True)
    return an
