"""Batched sampling with a KV cache, and a padding-invariant scorer.

Layout used everywhere: prompts are **left**-padded to ``P`` tokens, completions are
**right**-padded to ``T`` tokens; a sequence is ``[pad.. prompt | completion ..pad]`` with an
attention mask that is 0 on padding and position ids ``cumsum(mask) - 1``, so padding never
changes a real token's position or what it attends to. That is why scoring a sequence alone or
inside a padded batch gives the same log-probs (tested to 1e-5 in fp32).

Sampling randomness is drawn per row from a generator seeded by ``row_seeds[b]`` (inverse-CDF
sampling), so a row's sample does not depend on which other rows share its batch: the same rollout
comes out on 1 process or split across 2 (DDP), and after a resume.
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch

from shiftkit.models import resolve_dtype


@dataclasses.dataclass
class Rollouts:
    """A batch of sampled completions (B rows)."""

    prompt_ids_BP: torch.Tensor  # left-padded
    prompt_mask_BP: torch.Tensor
    completion_ids_BT: torch.Tensor  # right-padded with pad_id
    completion_mask_BT: torch.Tensor  # 1 on generated tokens (the EOS included), 0 after
    logp_BT: torch.Tensor  # log-prob of each sampled token under the sampling distribution
    eos_B: torch.Tensor  # bool: the row stopped at EOS (not truncated)
    texts: list[str]


def concat_rollouts(parts: list[Rollouts], pad_id: int) -> Rollouts:
    """Rows of several :class:`Rollouts` as one batch: prompts re-left-padded, completions re-right-padded
    to the widest part (the same layout a single :func:`sample` call gives)."""
    P = max(r.prompt_ids_BP.shape[1] for r in parts)
    T = max(r.completion_ids_BT.shape[1] for r in parts)

    def left(x, w, v):
        return torch.nn.functional.pad(x, (w - x.shape[1], 0), value=v)

    def right(x, w, v):
        return torch.nn.functional.pad(x, (0, w - x.shape[1]), value=v)

    return Rollouts(torch.cat([left(r.prompt_ids_BP, P, pad_id) for r in parts]),
                    torch.cat([left(r.prompt_mask_BP, P, 0) for r in parts]),
                    torch.cat([right(r.completion_ids_BT, T, pad_id) for r in parts]),
                    torch.cat([right(r.completion_mask_BT, T, 0) for r in parts]),
                    torch.cat([right(r.logp_BT, T, 0.0) for r in parts]),
                    torch.cat([r.eos_B for r in parts]), [t for r in parts for t in r.texts])


def encode_prompts(tokenizer, prompts: list[str], device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompt ids and mask (no special tokens are added)."""
    ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    return pad_left(ids, tokenizer.pad_token_id, device)


def pad_left(ids: list[list[int]], pad: int, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Token-id rows left-padded to the longest, and their mask."""
    P = max(len(x) for x in ids)
    ids_BP = torch.full((len(ids), P), pad, dtype=torch.long)
    mask_BP = torch.zeros((len(ids), P), dtype=torch.long)
    for b, x in enumerate(ids):
        if x:
            ids_BP[b, P - len(x):] = torch.tensor(x)
            mask_BP[b, P - len(x):] = 1
    return ids_BP.to(device), mask_BP.to(device)


def encode_completions(tokenizer, completions: list[str], add_eos: bool = True, device="cpu"):
    """Right-padded completion ids and mask (EOS appended by default)."""
    eos = tokenizer.eos_token_id
    ids = [tokenizer(c, add_special_tokens=False)["input_ids"] + ([eos] if add_eos else []) for c in completions]
    T = max(1, max(len(x) for x in ids))
    ids_BT = torch.full((len(ids), T), tokenizer.pad_token_id, dtype=torch.long)
    mask_BT = torch.zeros((len(ids), T), dtype=torch.long)
    for b, x in enumerate(ids):
        ids_BT[b, : len(x)] = torch.tensor(x, dtype=torch.long)
        mask_BT[b, : len(x)] = 1
    return ids_BT.to(device), mask_BT.to(device)


def _positions(mask_BL: torch.Tensor) -> torch.Tensor:
    return (mask_BL.cumsum(-1) - 1).clamp(min=0)


def process_logits(logits_BV: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Log-probs of the sampling distribution: temperature scaling, then nucleus (top-p) truncation."""
    logits_BV = logits_BV.float() / max(temperature, 1e-8)
    if top_p < 1.0:
        sorted_BV, idx_BV = logits_BV.sort(-1, descending=True)
        probs_BV = sorted_BV.softmax(-1)
        drop_BV = probs_BV.cumsum(-1) - probs_BV > top_p  # keep the smallest prefix with mass >= top_p
        sorted_BV = sorted_BV.masked_fill(drop_BV, float("-inf"))
        logits_BV = torch.full_like(logits_BV, float("-inf")).scatter(-1, idx_BV, sorted_BV)
    return logits_BV.log_softmax(-1)


def inverse_cdf(logp_BV: torch.Tensor, u_B: torch.Tensor) -> torch.Tensor:
    """Token ids ``[B]`` drawn by inverse-CDF from log-probs ``[B, V]`` with uniforms ``u_B`` in [0, 1).

    Token ``i`` is picked when ``u * total`` lies in ``[cdf_{i-1}, cdf_i)``; a zero-probability token
    has an empty interval, so it is never picked (``u = 0`` gives the first token with mass; a draw
    that rounds up to the total gives the last token with mass).
    """
    cdf_BV = logp_BV.exp().cumsum(-1)
    total_B1 = cdf_BV[:, -1:].contiguous()
    tok_B = torch.searchsorted(cdf_BV, u_B.unsqueeze(-1) * total_B1, right=True).squeeze(-1)
    return torch.minimum(tok_B, torch.searchsorted(cdf_BV, total_B1).squeeze(-1))


@torch.no_grad()
def sample(
    model,
    tokenizer,
    prompts: list[str] | None = None,
    *,
    prompt_ids: list[list[int]] | None = None,
    max_new_tokens: int = 64,
    temperature: float = 1.0,
    top_p: float = 1.0,
    greedy: bool = False,
    row_seeds: list[int] | None = None,
    seed: int = 0,
) -> Rollouts:
    """Sample one completion per prompt with a KV cache, stopping rows at EOS.

    The prompts are strings (``prompts``) or token-id rows (``prompt_ids``, e.g. a multi-turn context
    that already holds tool output). ``row_seeds[b]`` seeds row b's random stream (default ``seed + b``). Log-probs are of the
    sampling distribution (temperature/top-p applied); with ``greedy`` they are of the
    temperature-1 distribution.
    """
    from transformers import DynamicCache

    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    if (prompts is None) == (prompt_ids is None):
        raise ValueError("sample: give either prompts or prompt_ids")
    if prompt_ids is not None:
        ids_BP, mask_BP = pad_left(prompt_ids, tokenizer.pad_token_id, device)
    else:
        ids_BP, mask_BP = encode_prompts(tokenizer, prompts, device)
    B = ids_BP.shape[0]
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    u_BT = None
    if not greedy:  # row b's t-th uniform comes from its own stream, whatever else is in the batch
        seeds = row_seeds if row_seeds is not None else [seed + b for b in range(B)]
        u_BT = torch.stack([torch.rand(max_new_tokens, generator=torch.Generator().manual_seed(int(s)))
                            for s in seeds]).to(device)

    cache = DynamicCache(config=model.config)
    mask_AL = mask_BP  # A = rows still generating; finished rows are dropped from the batch and the cache
    out = model(input_ids=ids_BP, attention_mask=mask_AL, position_ids=_positions(mask_AL), cache=cache,
                use_cache=True, logits_to_keep=1)
    cache = out.cache
    logits_AV = out.logits[:, -1]
    pos_A = _positions(mask_AL)[:, -1]
    rows_A = torch.arange(B, device=device)
    comp_BT = torch.full((B, max_new_tokens), pad, dtype=torch.long, device=device)
    cmask_BT = torch.zeros((B, max_new_tokens), dtype=torch.long, device=device)
    logp_BT = torch.zeros((B, max_new_tokens), dtype=torch.float32, device=device)
    T = 0
    for t in range(max_new_tokens):
        if greedy:
            logp_AV = logits_AV.float().log_softmax(-1)
            tok_A = logp_AV.argmax(-1)
        else:
            logp_AV = process_logits(logits_AV, temperature, top_p)
            tok_A = inverse_cdf(logp_AV, u_BT[rows_A, t])
        comp_BT[rows_A, t] = tok_A
        cmask_BT[rows_A, t] = 1
        logp_BT[rows_A, t] = logp_AV.gather(-1, tok_A[:, None]).squeeze(-1)
        T = t + 1
        keep_A = tok_A != eos
        if not bool(keep_A.any()) or t == max_new_tokens - 1:
            break
        if not bool(keep_A.all()):  # compact: finished rows leave the batch and the KV cache
            idx = keep_A.nonzero().squeeze(-1)
            for layer in cache.layers:
                layer.batch_select_indices(idx)
            rows_A, tok_A, mask_AL, pos_A = rows_A[idx], tok_A[idx], mask_AL[idx], pos_A[idx]
        mask_AL = torch.cat([mask_AL, torch.ones(len(rows_A), 1, dtype=mask_AL.dtype, device=device)], 1)
        pos_A = pos_A + 1
        out = model(input_ids=tok_A[:, None], attention_mask=mask_AL, position_ids=pos_A[:, None], cache=cache,
                    use_cache=True)
        cache = out.cache
        logits_AV = out.logits[:, -1]
    comp_BT, cmask_BT, logp_BT = comp_BT[:, :T], cmask_BT[:, :T], logp_BT[:, :T]
    eos_B = ((comp_BT == eos) & cmask_BT.bool()).any(-1)
    texts = [tokenizer.decode(comp_BT[b][cmask_BT[b].bool()].tolist(), skip_special_tokens=True) for b in range(B)]
    model.train(was_training)
    return Rollouts(ids_BP, mask_BP, comp_BT, cmask_BT, logp_BT, eos_B, texts)


def forward_completion(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT,
                       dtype: str | torch.dtype | None = None, **model_kw):
    """The one teacher-forced forward over (left-padded prompt, right-padded completion) with
    ``position_ids = cumsum(mask) - 1``, under autocast when ``dtype`` is not fp32, through the model's
    own ``__call__`` (so a DDP/FSDP wrapper syncs). Returns the model output; position ``P-1+t``
    predicts completion token ``t``."""
    ids_BL = torch.cat([prompt_ids_BP, completion_ids_BT], 1)
    mask_BL = torch.cat([prompt_mask_BP, completion_mask_BT], 1)
    ctx = contextlib.nullcontext()
    if dtype is not None and resolve_dtype(dtype) != torch.float32:
        ctx = torch.autocast(device_type=ids_BL.device.type, dtype=resolve_dtype(dtype))
    with ctx:
        return model(input_ids=ids_BL, attention_mask=mask_BL, position_ids=_positions(mask_BL), use_cache=False,
                     **model_kw)


def forward_logits(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT,
                   dtype: str | torch.dtype | None = None) -> torch.Tensor:
    """Logits ``[B, T, V]`` predicting each completion token (grad flows if enabled)."""
    P = prompt_ids_BP.shape[1]
    out = forward_completion(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT, dtype)
    return out.logits[:, P - 1 : -1].float()


def token_logprobs(logits_BTV: torch.Tensor, ids_BT: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log p(ids) under ``softmax(logits / temperature)``, shape ``[B, T]``."""
    logp_BTV = (logits_BTV / temperature).log_softmax(-1)
    return logp_BTV.gather(-1, ids_BT.unsqueeze(-1)).squeeze(-1)


def score(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT,
          dtype: str | torch.dtype = "float32", temperature: float = 1.0, batch_size: int | None = None,
          grad: bool = False) -> torch.Tensor:
    """Per-token log-probs ``[B, T]`` of given completions under ``model`` (0 at padding)."""
    B = prompt_ids_BP.shape[0]
    bs = batch_size or B
    ctx = contextlib.nullcontext() if grad else torch.no_grad()
    outs = []
    with ctx:
        for s in range(0, B, bs):
            sl = slice(s, s + bs)
            logits_BTV = forward_logits(model, prompt_ids_BP[sl], prompt_mask_BP[sl], completion_ids_BT[sl],
                                        completion_mask_BT[sl], dtype)
            lp_BT = token_logprobs(logits_BTV, completion_ids_BT[sl], temperature)
            outs.append(lp_BT * completion_mask_BT[sl])
    return torch.cat(outs, 0)


def score_texts(model, tokenizer, prompts: list[str], completions: list[str], dtype="float32",
                add_eos: bool = True, batch_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Convenience: per-token log-probs and masks for (prompt, completion) strings."""
    device = next(model.parameters()).device
    p_ids, p_mask = encode_prompts(tokenizer, prompts, device)
    c_ids, c_mask = encode_completions(tokenizer, completions, add_eos, device)
    return score(model, p_ids, p_mask, c_ids, c_mask, dtype=dtype, batch_size=batch_size), c_mask
