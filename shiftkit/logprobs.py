"""Per-token log-probs from hidden states, in token chunks: the full ``[B, T, V]`` tensor never exists.

Every loop needs the same few quantities of a model's next-token distribution at the completion
positions: log-probs at the sampled token or at arbitrary candidate ids (``[B, T, K]``), the
student's top-K, the entropy, the teacher/reference divergence. Computed from full logits, each
costs ``B*T*V`` fp32 floats (2 GB at B=16, T=2048, V=151k, several times over for log-softmax, its
gradient, teacher and reference). Here the model returns its **last hidden state** ``[B, T, H]``
(``H`` << ``V``) and the head ``hidden @ W.T`` runs ``chunk`` positions at a time
(:func:`map_chunks`). With gradients on, a custom autograd function keeps nothing of a chunk for the
backward and recomputes its logits there, one chunk at a time, accumulating the head's weight
gradient in place: peak memory is ``O(chunk * V + V * H)``, whatever ``B * T``.

Each measure is written once, on full logits (:func:`logprobs_from_logits`, :func:`topk_from_logits`,
:func:`entropy_from_logits`, :func:`jsd_from_logits`, :func:`topk_overlap_from_logits`: the references),
and its chunked form over a :class:`Head` calls it per chunk: logits cast to fp32, divided by
``temperature`` (the student and the KL anchor at the sampling temperature, teacher and reference at
1), then log-softmaxed over the whole vocabulary. Losses over the whole vocabulary call
:func:`map_chunks` too (:func:`shiftkit.losses.direct_opd_full_vocab_loss`).

A :class:`Head` bundles what one model contributes: its hidden states, its output-embedding weight
(and bias) and the temperature. Shapes: ``B`` rows, ``T`` completion positions, ``H`` hidden size,
``V`` vocabulary, ``K`` candidates, ``N = B*T`` flattened positions, ``C`` positions per chunk.

Engines: DDP and FSDP2 (``fully_shard``, the head in the root unit) are tested on CPU/gloo to give
the 1-process gradient (FSDP2 keeps the root's parameters unsharded between its forward and
backward, and :func:`model_head` reads the weight after the forward). Not supported: a head that
is sharded after the forward (DeepSpeed ZeRO-3, FSDP1, an FSDP unit of its own around
``lm_head``), and heads that are not a plain linear layer (logit soft-capping).
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from typing import Callable

import torch
import torch.nn.functional as F

from shiftkit.errors import ShiftkitError
from shiftkit.microbatch import per_micro_batch
from shiftkit.models import autocast
from shiftkit.sampling import forward_completion

CHUNK_ELEMS = 2**24  # default chunk: about this many logits (64 MB in fp32) per [C, V] tensor


@dataclasses.dataclass
class Head:
    """One model's next-token head at the completion positions: ``softmax((h @ W.T + b) / temperature)``."""

    hidden_BTH: torch.Tensor
    weight_VH: torch.Tensor
    bias_V: torch.Tensor | None = None
    temperature: float = 1.0
    valid_BT: torch.Tensor | None = None  # the positions worth a logit (a packed forward's: the completion's); None = all

    @property
    def vocab(self) -> int:
        return self.weight_VH.shape[0]

    def detach(self) -> "Head":
        return Head(self.hidden_BTH.detach(), self.weight_VH.detach(),
                    None if self.bias_V is None else self.bias_V.detach(), self.temperature, self.valid_BT)


def lm_head_of(model) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(weight [V, H], bias [V] or None)`` of an HF causal LM's output layer (DDP wrapper accepted)."""
    m = model.module if hasattr(model, "module") else model
    cfg = getattr(m, "config", None)
    if getattr(cfg, "final_logit_softcapping", None):
        raise ShiftkitError(f"{type(m).__name__} soft-caps its logits; chunked log-probs need a plain linear head")
    head = m.get_output_embeddings()
    if not isinstance(head, torch.nn.Linear):
        raise ShiftkitError(f"{type(m).__name__}'s output layer is {type(head).__name__}, not nn.Linear; "
                            "chunked log-probs need a plain linear head")
    return head.weight, head.bias


def forward_hidden(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT,
                   dtype: str | torch.dtype | None = None) -> torch.Tensor:
    """Last hidden state ``[B, T, H]`` at the positions predicting each completion token.

    :func:`shiftkit.sampling.forward_completion` (the forward behind ``forward_logits``), asking for
    no logits (``logits_to_keep`` = an empty index).
    """
    P = prompt_ids_BP.shape[1]
    out = forward_completion(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT, dtype,
                             output_hidden_states=True,
                             logits_to_keep=torch.empty(0, dtype=torch.long, device=prompt_ids_BP.device))
    return out.hidden_states[-1][:, P - 1 : -1]


# ---- the padding-free (packed) forward -------------------------------------------------------------
#
# The rows of a micro-batch are laid end to end as one sequence ``[1, N]`` (N = the real tokens, no
# padding) with position ids restarting at 0 for each row and no attention mask. transformers (>= 4.53)
# reads the restarts as row boundaries: flash-attention runs varlen attention (``cu_seqlens`` from the
# position ids), sdpa and eager a block-causal mask, so no token attends across rows and every token
# keeps the position it has in the padded layout (``cumsum(mask) - 1``). The last hidden states at the
# completion positions go back into the ``[B, T]`` layout (0 at padding) and the head runs only there
# (``Head.valid_BT``). Equal to the padded forward up to float rounding (the matmuls see other shapes).
# A model whose attention would read across the rows is refused once, by a probe (:func:`check_packing`).

def packed_layout(prompt_mask_BP: torch.Tensor, completion_mask_BT: torch.Tensor):
    """``(keep_BL, pos_N, src_BT)`` of the packed sequence: which of the ``[prompt | completion]`` columns
    are real tokens, each real token's position id, and for each completion position the index of the
    packed token whose output predicts it (-1 at padding). The masks must be the foundation's layout:
    prompts left-padded, completions right-padded (:mod:`shiftkit.sampling`), and every row has a prompt token."""
    B, P = prompt_mask_BP.shape
    T = completion_mask_BT.shape[1]
    p_len_B, c_len_B = prompt_mask_BP.long().sum(-1), completion_mask_BT.long().sum(-1)
    ar_P = torch.arange(P, device=p_len_B.device)
    ar_T = torch.arange(T, device=p_len_B.device)
    if not (torch.equal(prompt_mask_BP.bool(), ar_P[None] >= (P - p_len_B)[:, None])
            and torch.equal(completion_mask_BT.bool(), ar_T[None] < c_len_B[:, None])):
        raise ShiftkitError("packing=true needs left-padded prompts and right-padded completions without holes")
    if B and int(p_len_B.min()) < 1:
        raise ShiftkitError("packing=true needs at least one prompt token in every row")
    keep_BL = torch.cat([prompt_mask_BP, completion_mask_BT], 1).bool()
    pos_N = (keep_BL.long().cumsum(-1) - 1)[keep_BL]
    n_B = p_len_B + c_len_B
    first_B = n_B.cumsum(0) - n_B  # where each row starts in the packed sequence
    src_BT = first_B[:, None] + p_len_B[:, None] - 1 + ar_T[None]
    return keep_BL, pos_N, torch.where(completion_mask_BT.bool(), src_BT, torch.full_like(src_BT, -1))


def forward_packed_hidden(model, ids_1N: torch.Tensor, pos_1N: torch.Tensor, dtype=None) -> torch.Tensor:
    """Last hidden states ``[N, H]`` of one packed sequence (position ids restart per row, no mask),
    under autocast when ``dtype`` is not fp32 (as :func:`shiftkit.sampling.forward_completion`)."""
    with autocast(ids_1N.device.type, dtype):
        out = model(input_ids=ids_1N, attention_mask=None, position_ids=pos_1N, use_cache=False,
                    output_hidden_states=True, logits_to_keep=torch.empty(0, dtype=torch.long, device=ids_1N.device))
    return out.hidden_states[-1][0]


_PACKING_CHECKED: "weakref.WeakSet" = weakref.WeakSet()


@torch.no_grad()
def check_packing(model) -> None:
    """Refuse (once per model) a model whose attention reads across packed rows: two rows of 3 and 5
    tokens, packed, against each row alone. A model that ignores the restarting position ids, or an
    attention implementation that ignores the packed layout, gives the second row other states."""
    m = model.module if hasattr(model, "module") and hasattr(model, "no_sync") else model  # DDP: its module
    if m in _PACKING_CHECKED:
        return
    dev = lm_head_of(m)[0].device
    rows = [torch.arange(1, 4, device=dev), torch.arange(4, 9, device=dev)]
    was = m.training
    m.eval()
    try:
        alone = torch.cat([forward_packed_hidden(m, x[None], torch.arange(len(x), device=dev)[None]) for x in rows])
        pos = torch.cat([torch.arange(len(x), device=dev) for x in rows])
        packed = forward_packed_hidden(m, torch.cat(rows)[None], pos[None])
    finally:
        m.train(was)
    err = float((packed.float() - alone.float()).abs().max()) / max(float(alone.float().abs().max()), 1e-6)
    if not err < 1e-3:
        impl = getattr(getattr(m, "config", None), "_attn_implementation", "?")
        raise ShiftkitError(f"packing=true: {type(m).__name__} (attention '{impl}') mixes packed rows (relative "
                            f"difference {err:.2g} from the rows alone); set packing=false")
    _PACKING_CHECKED.add(m)


def packed_head(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT, *,
                dtype: str | torch.dtype | None = None, temperature: float = 1.0) -> Head:
    """:func:`model_head` by one padding-free forward of the rows packed end to end (see above)."""
    check_packing(model)
    keep_BL, pos_N, src_BT = packed_layout(prompt_mask_BP, completion_mask_BT)
    ids_N = torch.cat([prompt_ids_BP, completion_ids_BT], 1)[keep_BL]
    h_NH = forward_packed_hidden(model, ids_N[None], pos_N[None], dtype)
    valid_BT = src_BT >= 0
    b_idx, t_idx = valid_BT.nonzero(as_tuple=True)
    hidden_BTH = h_NH.new_zeros(*src_BT.shape, h_NH.shape[-1]).index_put((b_idx, t_idx), h_NH[src_BT[valid_BT]])
    w, b = lm_head_of(model)
    return Head(hidden_BTH, w, b, temperature, valid_BT)


def model_head(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT, *,
               dtype: str | torch.dtype | None = None, temperature: float = 1.0, packed: bool = False) -> Head:
    """:func:`forward_hidden` plus the model's output layer, as a :class:`Head`.

    The weight is read *after* the forward: under FSDP2 the root module's parameters (embeddings and
    head) stay unsharded between its forward and backward, so this is the full ``[V, H]`` tensor.
    ``packed``: the padding-free forward (:func:`packed_head`; a micro-batch's ``mb.packed``).
    """
    if packed:
        return packed_head(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT, dtype=dtype,
                           temperature=temperature)
    h = forward_hidden(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT, dtype)
    w, b = lm_head_of(model)
    return Head(h, w, b, temperature)


def logits_of(head: Head, rows: slice | None = None) -> torch.Tensor:
    """fp32 logits ``[N or C, V]`` of the flattened positions ``rows``, divided by the temperature.

    The unchunked reference is ``logits_of(head)`` (all ``N`` rows), i.e. ``forward_logits / T``.
    """
    h_NH = head.hidden_BTH.reshape(-1, head.hidden_BTH.shape[-1])
    if rows is not None:
        h_NH = h_NH[rows]
    return F.linear(h_NH, head.weight_VH, head.bias_V).float() / head.temperature


def default_chunk(vocab: int) -> int:
    return max(1, CHUNK_ELEMS // max(1, vocab))


def _autocast_state(device_type: str):
    on = torch.is_autocast_enabled(device_type)
    return on, (torch.get_autocast_dtype(device_type) if on else None)


class _ChunkedHead(torch.autograd.Function):
    """Forward: ``fn`` over chunks of positions without building a graph. Backward: per chunk, recompute
    that chunk's logits, get ``d fn / d logits`` by autograd, and apply the head's linear backward by
    hand, accumulating ``grad W`` **in place** into one buffer (autograd's own accumulation over chunks
    would hold several ``[V, H]`` gradients at once)."""

    @staticmethod
    def forward(ctx, fn, heads_meta, C, n_extra, *tensors):
        # tensors: per head (hidden [N, H], weight [V, H], bias [V] or empty), then the flattened extras
        ctx.fn, ctx.meta, ctx.C, ctx.n_extra = fn, heads_meta, C, n_extra
        dev = tensors[0].device.type
        ctx.dev, ctx.autocast = dev, _autocast_state(dev)
        outs = _run_chunks(fn, heads_meta, C, tensors, n_extra)
        ctx.save_for_backward(*tensors)
        nondiff = [o for o in outs if not o.is_floating_point()]
        if nondiff:
            ctx.mark_non_differentiable(*nondiff)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        tensors = ctx.saved_tensors
        meta, C, n_extra = ctx.meta, ctx.C, ctx.n_extra
        nh = len(meta)
        extras = tensors[3 * nh:]
        need = [ctx.needs_input_grad[4 + 3 * i : 4 + 3 * i + 3] for i in range(nh)]
        g_in = [None] * len(tensors)
        for i in range(nh):
            h, w, b = tensors[3 * i : 3 * i + 3]
            if any(need[i]):
                g_in[3 * i] = torch.zeros_like(h) if need[i][0] else None
                g_in[3 * i + 1] = torch.zeros_like(w) if need[i][1] else None
                g_in[3 * i + 2] = torch.zeros_like(b) if need[i][2] and meta[i][1] else None
        N = tensors[0].shape[0]
        on, dt = ctx.autocast
        for start in range(0, N, C):
            stop = min(start + C, N)
            with torch.enable_grad(), torch.autocast(ctx.dev, dtype=dt, enabled=on) if on else contextlib.nullcontext():
                leaves, lins = [], []
                for i, (temp, has_b) in enumerate(meta):
                    h, w, b = tensors[3 * i : 3 * i + 3]
                    with torch.no_grad():
                        lin = F.linear(h[start:stop], w, b if has_b else None)
                    lins.append(lin)
                    leaves.append((lin.float() / temp).requires_grad_(any(need[i])))
                outs = ctx.fn(leaves, [e[start:stop] for e in extras])
                pairs = [(o, g[start:stop].reshape(o.shape)) for o, g in zip(outs, grads)
                         if g is not None and o.requires_grad]
                want = [leaves[i] for i in range(nh) if any(need[i])]
                if not pairs or not want:
                    continue
                d_logits = torch.autograd.grad([o for o, _ in pairs], want, [g for _, g in pairs], allow_unused=True)
            k = 0
            for i, (temp, has_b) in enumerate(meta):
                if not any(need[i]):
                    continue
                d = d_logits[k]
                k += 1
                if d is None:
                    continue
                h, w, _ = tensors[3 * i : 3 * i + 3]
                d_lin = (d / temp).to(w.dtype)  # d loss / d (h @ W.T + b)
                if g_in[3 * i] is not None:
                    g_in[3 * i][start:stop] = (d_lin @ w).to(h.dtype)
                if g_in[3 * i + 1] is not None:
                    g_in[3 * i + 1].addmm_(d_lin.t(), h[start:stop].to(w.dtype))
                if g_in[3 * i + 2] is not None:
                    g_in[3 * i + 2].add_(d_lin.sum(0).to(g_in[3 * i + 2].dtype))
        return (None, None, None, None, *g_in)


def _run_chunks(fn, meta, C, tensors, n_extra):
    nh = len(meta)
    N = tensors[0].shape[0]
    extras = tensors[3 * nh:]
    outs = []
    for start in range(0, max(N, 1), C):
        stop = min(start + C, N)
        logits = []
        for i, (temp, has_b) in enumerate(meta):
            h, w, b = tensors[3 * i : 3 * i + 3]
            logits.append(F.linear(h[start:stop], w, b if has_b else None).float() / temp)
        outs.append(tuple(fn(logits, [e[start:stop] for e in extras])))
    return [torch.cat([o[j] for o in outs], 0) for j in range(len(outs[0]))]


def map_chunks(fn: Callable, heads: list[Head], extras: list[torch.Tensor] = (), chunk: int | None = None):
    """Apply ``fn(logits_list, extras_list) -> tuple of [C, ...] tensors`` chunk by chunk and concatenate.

    ``heads`` share ``B`` and ``T``; ``fn`` gets each head's fp32 logits ``[C, V]`` (temperature
    applied) and each extra flattened to ``[C, ...]`` (extras are ``[B, T, ...]``, never
    differentiated). Outputs come back as ``[B, T, ...]``; ``fn`` must be a deterministic function
    of its inputs (it is re-run per chunk in the backward). With grad enabled and a head that needs
    it, a custom autograd function (:class:`_ChunkedHead`) keeps no chunk's tensors for the backward
    and recomputes them one chunk at a time there: memory is one chunk's ``[C, V]`` tensors plus one
    ``[V, H]`` weight gradient, whatever ``B * T``. ``T = 0`` (or ``B = 0``) works: ``fn`` sees one
    empty chunk.
    """
    B, T = heads[0].hidden_BTH.shape[:2]
    for h in heads:
        if tuple(h.hidden_BTH.shape[:2]) != (B, T):
            raise ValueError(f"heads disagree on [B, T]: {tuple(h.hidden_BTH.shape[:2])} vs {(B, T)}")
    N = B * T
    C = chunk or default_chunk(max(h.vocab for h in heads))
    valid_BT = next((h.valid_BT for h in heads if h.valid_BT is not None), None)
    idx = None if valid_BT is None else valid_BT.reshape(-1).nonzero().squeeze(-1)  # only these positions get logits
    pick = (lambda x: x) if idx is None else (lambda x: x[idx])
    tensors = []
    for h in heads:
        tensors += [pick(h.hidden_BTH.reshape(N, h.hidden_BTH.shape[-1])), h.weight_VH,
                    h.bias_V if h.bias_V is not None else h.weight_VH.new_empty(0)]
    tensors += [pick(e.reshape(N, *e.shape[2:])) for e in extras]
    meta = tuple((h.temperature, h.bias_V is not None) for h in heads)
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors[: 3 * len(heads)])
    if grad:
        outs = _ChunkedHead.apply(fn, meta, C, len(extras), *tensors)
    else:
        outs = _run_chunks(fn, meta, C, tensors, len(extras))
    if idx is not None:  # back to every position, 0 where no logit was computed
        outs = [o.new_zeros(N, *o.shape[1:]).index_copy(0, idx, o) for o in outs]
    return tuple(o.reshape(B, T, *o.shape[1:]) for o in outs)


# ---- measures of a next-token distribution on full logits (the references of the chunked forms) ----

def logprobs_from_logits(logits_BTV: torch.Tensor, ids_BTK: torch.Tensor) -> torch.Tensor:
    """Exact log-probs (softmax over the full vocabulary, fp32) at arbitrary candidate ids ``[B,T,K]``."""
    return logits_BTV.float().log_softmax(-1).gather(-1, ids_BTK)


def topk_from_logits(logits_BTV: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The top-``k`` ids and their (full-softmax) log-probs, both ``[B,T,K]`` (the student's candidates)."""
    logp_BTV = logits_BTV.float().log_softmax(-1)
    logp_BTK, ids_BTK = logp_BTV.topk(min(k, logp_BTV.shape[-1]), dim=-1)
    return ids_BTK, logp_BTK


def entropy_from_logits(logits_BTV: torch.Tensor) -> torch.Tensor:
    """Per-token entropy ``[B, T]`` of softmax(logits)."""
    logp_BTV = logits_BTV.float().log_softmax(-1)
    return -(logp_BTV.exp() * logp_BTV).sum(-1)


def jsd_from_logits(a_BTV: torch.Tensor, b_BTV: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence (nats) between two next-token distributions, per position ``[B,T]``."""
    la_BTV, lb_BTV = a_BTV.float().log_softmax(-1), b_BTV.float().log_softmax(-1)
    lm_BTV = torch.logaddexp(la_BTV, lb_BTV) - torch.log(torch.tensor(2.0))
    kl_a = (la_BTV.exp() * (la_BTV - lm_BTV)).sum(-1)
    kl_b = (lb_BTV.exp() * (lb_BTV - lm_BTV)).sum(-1)
    return (0.5 * (kl_a + kl_b)).clamp(min=0.0)


def topk_overlap_from_logits(a_logits_BTV: torch.Tensor, b_logits_BTV: torch.Tensor, k: int) -> torch.Tensor:
    """Fraction of shared ids between the top-``k`` sets of two distributions, per position ``[B,T]``."""
    k = min(k, a_logits_BTV.shape[-1])
    ia = a_logits_BTV.topk(k, -1).indices
    ib = b_logits_BTV.topk(k, -1).indices
    return (ia.unsqueeze(-1) == ib.unsqueeze(-2)).any(-1).float().mean(-1)


# ---- the quantities the loops need -------------------------------------------------------------

def gather_logprobs(head: Head, ids_BTK: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
    """Exact log-probs (full-vocabulary softmax) at arbitrary ids ``[B, T, K]`` (= :func:`logprobs_from_logits`)."""
    return map_chunks(lambda lg, ex: (logprobs_from_logits(lg[0], ex[0]),), [head], [ids_BTK], chunk)[0]


def token_logprobs(head: Head, ids_BT: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
    """log p(ids) ``[B, T]`` (= sampling.token_logprobs on the logits divided by the temperature)."""
    return gather_logprobs(head, ids_BT.unsqueeze(-1), chunk).squeeze(-1)


def token_logprobs_entropy(head: Head, ids_BT: torch.Tensor, chunk: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log p(ids) [B, T], entropy [B, T])`` in one pass over the chunks; the entropy (a metric) carries no grad."""
    return map_chunks(lambda lg, ex: (logprobs_from_logits(lg[0], ex[0]).squeeze(-1),
                                      entropy_from_logits(lg[0].detach())),
                      [head], [ids_BT.unsqueeze(-1)], chunk)


def student_topk(head: Head, k: int, chunk: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-``k`` ids and their log-probs ``[B, T, K]`` (= :func:`topk_from_logits`; ids chosen without grad)."""
    k = min(k, head.vocab)

    def fn(lg, ex):
        ids = topk_from_logits(lg[0].detach(), k)[0]
        return ids, logprobs_from_logits(lg[0], ids)

    return map_chunks(fn, [head], [], chunk)


def entropy(head: Head, chunk: int | None = None) -> torch.Tensor:
    """Per-position entropy ``[B, T]`` (= :func:`entropy_from_logits`)."""
    return map_chunks(lambda lg, ex: (entropy_from_logits(lg[0]),), [head], [], chunk)[0]


def topk_mass(head: Head, k: int, chunk: int | None = None) -> torch.Tensor:
    """Probability mass of the top-``k`` tokens per position ``[B, T]``, no grad (a diagnostic)."""
    with torch.no_grad():
        return map_chunks(lambda lg, ex: (lg[0].softmax(-1).topk(min(k, lg[0].shape[-1]), -1).values.sum(-1),),
                          [head], [], chunk)[0]


def jsd(a: Head, b: Head, chunk: int | None = None) -> torch.Tensor:
    """Jensen-Shannon divergence per position ``[B, T]`` (= :func:`jsd_from_logits`)."""
    return map_chunks(lambda lg, ex: (jsd_from_logits(lg[0], lg[1]),), [a, b], [], chunk)[0]


def topk_overlap(a: Head, b: Head, k: int, chunk: int | None = None) -> torch.Tensor:
    """Shared fraction of the two top-``k`` sets per position ``[B, T]`` (= :func:`topk_overlap_from_logits`), no grad."""
    with torch.no_grad():
        return map_chunks(lambda lg, ex: (topk_overlap_from_logits(lg[0], lg[1], k),), [a, b], [], chunk)[0]


@torch.no_grad()
def score(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT, *,
          dtype: str | torch.dtype = "float32", temperature: float = 1.0, chunk: int | None = None,
          packed: bool = False) -> torch.Tensor:
    """Per-token log-probs ``[B, T]`` of given completions, 0 at padding (= sampling.score, no [B,T,V])."""
    head = model_head(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT, dtype=dtype,
                      temperature=temperature, packed=packed)
    return token_logprobs(head, completion_ids_BT, chunk) * completion_mask_BT


@torch.no_grad()
def score_mb(model, prompt_ids_BP, prompt_mask_BP, completion_ids_BT, completion_mask_BT, mbs: list, *,
             dtype=None, temperature: float = 1.0, chunk: int = 0) -> torch.Tensor:
    """Per-token log-probs ``[B, T]`` (0 at padding) scored micro-batch by micro-batch through the
    chunked head (:func:`score`): memory of one micro-batch, never ``[B, T, V]``."""
    return per_micro_batch(mbs, completion_ids_BT, lambda mb: score(
        model, mb.prompt(prompt_ids_BP), mb.prompt(prompt_mask_BP), mb.completion(completion_ids_BT),
        mb.completion(completion_mask_BT), dtype=dtype or "float32", temperature=temperature, chunk=chunk or None,
        packed=mb.packed))
