"""Checks before any Direct-OPD training step.

1. The teacher and its reference are different weights (else Delta = 0 everywhere).
2. Student, teacher and reference agree on the vocabulary, the special tokens (ids *and* meanings),
   the chat template and how the training prompts render to ids, and on the model's output size. A
   mismatch is an error that names the differing tokens; ``allow_tokenizer_mismatch=true`` overrides.
3. Scorer determinism: scoring the same batch twice, and one row alone vs inside the padded batch,
   agree within ``tol`` nats (Delta is a small difference of two log-probs; noise must be far below it).
"""

from __future__ import annotations

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
