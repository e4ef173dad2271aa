"""Token batches of multi-turn rows with assistant-only masks, and the update on them.

A row is ``(ids, gen)``: the conversation's token ids and the mask of the tokens the model generated
(assistant turns incl. their EOS; :func:`chat_examples` from chat rows, or the toy loop's rollouts).
:func:`collate` lays rows out as the foundation's batch (prompt up to the first generated token
left-padded, the rest right-padded); the loss touches ``gen_BT`` only, while tool outputs and the
harness's text are attended to. :func:`masked_sft_step` is behaviour cloning / RFT on such rows.
"""

from __future__ import annotations

import torch

from shiftkit import logprobs, losses
from shiftkit.agent.chat import tokenize_chat
from shiftkit.loopkit import grad_norm_clip
from shiftkit.microbatch import MicroBatch
from shiftkit.prompts import left_pad, right_pad


def chat_examples(tok, rows: list[dict], max_len: int = 0) -> list[tuple[list[int], list[int]]]:
    """Chat rows -> ``(ids, assistant_mask)``; ``max_len`` > 0 keeps the last ``max_len`` tokens."""
    out = []
    for r in rows:
        ids, mask = tokenize_chat(tok, r["messages"], r.get("tools"))
        if max_len and len(ids) > max_len:
            ids, mask = ids[-max_len:], mask[-max_len:]
        out.append((ids, mask))
    return out


def collate(examples: list[tuple[list[int], list[int]]], pad_id: int, logps: list[list[float]] | None = None) -> dict:
    """``(ids, gen_mask)`` rows -> the prompt (up to the first generated token, left-padded) and the rest
    (right-padded) with ``valid_BT`` (attention) and ``gen_BT`` (loss) masks; with ``logps`` (one value per
    token of each row, as :func:`shiftkit.agent.rl.toy_rollouts` records them) also ``rollout_logp_BT``,
    aligned with the rest."""
    splits = []
    for ids, gen in examples:
        p = gen.index(1) if 1 in gen else len(ids) - 1
        p = max(1, p)
        splits.append((ids[:p], ids[p:], gen[p:]))
    prompt_BP, pmask_BP = left_pad([pr for pr, _, _ in splits], pad_id)
    rest_BT, valid_BT = right_pad([rest for _, rest, _ in splits], pad_id)
    gen_BT, _ = right_pad([g for _, _, g in splits], 0)
    out = {"prompt_BP": prompt_BP, "pmask_BP": pmask_BP, "rest_BT": rest_BT, "valid_BT": valid_BT, "gen_BT": gen_BT}
    if logps is None:
        return out
    lp_BT = torch.zeros(rest_BT.shape, dtype=torch.float32)
    for b, (pr, rest, _) in enumerate(splits):
        lp_BT[b, :len(rest)] = torch.tensor(logps[b][len(pr):], dtype=torch.float32)
    return {**out, "rollout_logp_BT": lp_BT}


def policy_logp(model, batch: dict, dtype=None, chunk: int | None = None,
                packed: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs ``[B, T]`` of the rest tokens and the per-position entropy (no grad), from
    the chunked head (:mod:`shiftkit.logprobs`: no ``[B, T, V]``; ``packed``: the padding-free forward)."""
    head = logprobs.model_head(model, batch["prompt_BP"], batch["pmask_BP"], batch["rest_BT"], batch["valid_BT"],
                               dtype=dtype, packed=packed)
    lp_BT, ent_BT = logprobs.token_logprobs_entropy(head, batch["rest_BT"], chunk)
    return lp_BT, ent_BT.detach()


def micro(batch: dict, mb: MicroBatch) -> dict:
    """A micro-batch's view of a :func:`collate` batch (rows, each side's padding trimmed)."""
    return {k: (mb.prompt(v) if k in ("prompt_BP", "pmask_BP") else mb.completion(v)) for k, v in batch.items()}


def masked_sft_step(model, opt, examples, pad_id: int, grad_clip: float = 1.0) -> float:
    """One step of NLL on generated tokens only (:func:`shiftkit.losses.sft_loss` with the gen mask)."""
    batch = collate(examples, pad_id)
    lp_BT, _ = policy_logp(model, batch)
    loss = losses.sft_loss_from_logprobs(lp_BT, batch["gen_BT"])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm_clip(model, grad_clip)
    opt.step()
    return float(loss.detach())
