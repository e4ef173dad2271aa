"""Micro-batches by token budget, exact gradient accumulation, gradient checkpointing, fp32 master weights.

Memory of a training forward grows with ``rows x columns`` of the micro-batch, so a rollout batch is
split into micro-batches of at most ``token_budget`` padded tokens (prompt + completion columns, after
trimming each micro-batch's own padding). Accumulating ``backward()`` over the micro-batches gives
**exactly** the full-batch gradient when every micro-batch's loss is normalised by the *global*
count (``num_tokens`` for ``token_mean``, ``num_seqs`` for ``seq_mean``; the ``num_tokens`` /
``num_seqs`` arguments of :func:`shiftkit.losses.policy_loss` and friends): the aggregate is then a
sum of per-micro-batch terms. :func:`global_counts` computes those counts (summed over ranks).

Trimming is exact because of the batch layout (:mod:`shiftkit.sampling`): prompts are left-padded,
completions right-padded and positions are ``cumsum(mask) - 1``, so dropping all-padding columns
changes no real token's position or attention.

No wasted work: rows whose loss has no gradient (:func:`rows_with_gradient`: advantage 0 everywhere
and no KL term) enter no micro-batch (``keep_B``), with the global counts unchanged, so the update is
the one over every row; no row left, no micro-batch, and the loop skips the forward, the backward and
the optimizer step. ``packing`` (the ``packing`` key): each micro-batch's rows run as one sequence
without padding (:func:`shiftkit.logprobs.packed_head`), the budget counting real tokens; equal to the
padded update to fp32 rounding (the matmuls see other shapes), so it is a key, off by default.

Mixed precision: the model stays in fp32 (the *master* weights; the optimizer's state follows the
parameters' dtype, so it is fp32 too, :func:`check_fp32_master`) and the training forward runs its
matmuls in bf16 under autocast (``autocast=bfloat16``: :func:`autocast_dtype` is the ``dtype`` of
:func:`shiftkit.sampling.forward_completion`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable, Iterator

import torch

from shiftkit.errors import ShiftkitError


@dataclasses.dataclass(frozen=True)
class MicroBatch:
    """Rows of a batch, with their own padding trimmed: prompt columns ``[p_start:]``, completion ``[:t_stop]``."""

    rows: torch.Tensor  # long indices into the batch
    p_start: int
    t_stop: int
    scale: float = 1.0  # 0 for a filler that only keeps ranks in step (see micro_batches(d=...))
    packed: bool = False  # the forward packs the rows into one sequence (no padding; shiftkit.logprobs.model_head)

    def rows_of(self, x_B: torch.Tensor) -> torch.Tensor:
        """Per-row tensors (``[B, ...]``, e.g. sequence advantages): this micro-batch's rows."""
        return x_B[self.rows.to(x_B.device)]

    def prompt(self, x_BP: torch.Tensor) -> torch.Tensor:
        """Prompt-aligned tensors ``[B, P, ...]`` (ids, mask): rows, left padding trimmed."""
        return x_BP[self.rows.to(x_BP.device)][:, self.p_start:]

    def completion(self, x_BT: torch.Tensor) -> torch.Tensor:
        """Completion-aligned tensors ``[B, T, ...]`` (ids, mask, old log-probs, advantages, candidates)."""
        return x_BT[self.rows.to(x_BT.device)][:, : self.t_stop]

    def put(self, dst_BT: torch.Tensor, x_bt: torch.Tensor) -> torch.Tensor:
        """Write a per-micro-batch completion result back into the full-batch tensor ``dst_BT``
        (rows ``self.rows``, columns ``[:t_stop]``; the trimmed padding columns keep ``dst``'s value)."""
        rows = self.rows.to(dst_BT.device)
        dst_BT[rows, : self.t_stop] = x_bt.to(dst_BT.dtype)
        return dst_BT

    @property
    def size(self) -> int:
        return int(self.rows.numel())


def micro_batches(prompt_mask_BP: torch.Tensor, completion_mask_BT: torch.Tensor, token_budget: int | None = None,
                  *, sort_by_length: bool = False, d=None, keep_B: torch.Tensor | None = None,
                  packed: bool = False) -> list[MicroBatch]:
    """Split a batch into micro-batches of at most ``token_budget`` tokens each.

    A micro-batch's cost is ``rows * (prompt columns + completion columns)`` after trimming its own
    padding, or with ``packed`` (the padding-free forward, :func:`shiftkit.logprobs.model_head`) its
    real tokens, ``sum(prompt + completion lengths)``. Rows are packed greedily in batch order
    (``sort_by_length``: longest first, which wastes less padding); a single row longer than the budget
    forms a micro-batch of its own. ``token_budget`` None or 0: one micro-batch holding every row
    (still trimmed).

    ``keep_B`` (bool ``[B]``): only these rows enter the micro-batches; the others get no forward or
    backward. The update drops rows that carry no gradient this way (advantage 0 everywhere and no KL):
    the losses are normalised by the global counts of the whole batch (:func:`global_counts`), so the
    dropped rows' terms, exactly 0, are all that changes. No row kept: no micro-batch.

    ``d`` (a Dist, or anything with ``world``): every rank gets the same number of micro-batches, the
    largest count over ranks; a rank with fewer repeats its last micro-batch (or, with none, row 0)
    with ``scale=0`` (its loss is multiplied by 0, see :func:`accumulating`). FSDP all-gathers parameters
    in every forward, so ranks running different numbers of forwards would hang.
    """
    if token_budget is not None and token_budget < 0:
        raise ShiftkitError(f"token_budget must be >= 0 (0 = no limit), got {token_budget}")
    B, P = prompt_mask_BP.shape
    p_len_B = prompt_mask_BP.long().sum(-1).cpu()
    c_mask = completion_mask_BT.long().cpu()
    T = c_mask.shape[1]
    # right-padded completions: the last valid column + 1 (at least 1, so the forward has a column)
    idx_T = torch.arange(1, T + 1)
    c_len_B = (c_mask * idx_T).amax(-1) if T else torch.zeros(B, dtype=torch.long)
    order = sorted(range(B), key=lambda i: -int(p_len_B[i] + c_len_B[i])) if sort_by_length else list(range(B))
    if keep_B is not None:
        keep = keep_B.bool().cpu()
        order = [i for i in order if keep[i]]
    groups: list[list[int]] = []
    cur: list[int] = []
    mp = mt = tokens = 0
    for i in order:
        np_, nt = max(mp, int(p_len_B[i])), max(mt, int(c_len_B[i]), 1 if T else 0)
        n_i = int(p_len_B[i] + c_len_B[i])
        cost = tokens + n_i if packed else (len(cur) + 1) * (np_ + nt)
        if cur and token_budget and cost > token_budget:
            groups.append(cur)
            cur, np_, nt, tokens = [], int(p_len_B[i]), max(int(c_len_B[i]), 1 if T else 0), 0
        cur.append(i)
        mp, mt, tokens = np_, nt, tokens + n_i
    if cur:
        groups.append(cur)
    out = [_trimmed(torch.tensor(sorted(g), dtype=torch.long), p_len_B, c_len_B, P, T, packed) for g in groups]
    if d is not None and getattr(d, "world", 1) > 1:
        import torch.distributed as dist

        n = torch.tensor(len(out), dtype=torch.long, device=getattr(d, "device", "cpu"))  # NCCL: a device tensor
        dist.all_reduce(n, op=dist.ReduceOp.MAX)
        if int(n) > len(out):
            last = out[-1] if out else _trimmed(torch.zeros(1, dtype=torch.long), p_len_B, c_len_B, P, T, packed)
            out += [dataclasses.replace(last, scale=0.0)] * (int(n) - len(out))
    return out


def _trimmed(rows: torch.Tensor, p_len_B: torch.Tensor, c_len_B: torch.Tensor, P: int, T: int,
             packed: bool) -> MicroBatch:
    p_keep = max(1, int(p_len_B[rows].max())) if P else 0
    t_keep = max(1, int(c_len_B[rows].max())) if T else 0
    return MicroBatch(rows, P - min(P, p_keep), min(T, t_keep), packed=packed)


def rows_with_gradient(adv: torch.Tensor, mask_BT: torch.Tensor | None = None, *, other_terms: bool = False) -> torch.Tensor:
    """Bool ``[B]``: the rows whose loss has a gradient, the rows :func:`micro_batches` keeps (``keep_B``).

    A policy-gradient row with advantage 0 at every valid position (and every candidate: ``adv`` is
    ``[B]``, ``[B, T]`` or ``[B, T, K]``; ``mask_BT`` the valid positions) contributes exactly 0 to the
    gradient; ``other_terms`` (a KL or an entropy term in the loss) keeps every row.
    """
    B = adv.shape[0]
    if other_terms:
        return torch.ones(B, dtype=torch.bool)
    nz = adv != 0
    if mask_BT is not None and adv.dim() > 1:
        m = mask_BT.bool().to(adv.device)
        nz = nz & (m if adv.dim() == 2 else m.unsqueeze(-1))
    return nz.reshape(B, -1).any(-1).cpu()


def per_micro_batch(mbs: list[MicroBatch], like_BT: torch.Tensor, fn: Callable[[MicroBatch], torch.Tensor]) -> torch.Tensor:
    """``fn(mb)`` (``[b, t]``) of every micro-batch written back into one fp32 ``[B, T]`` tensor shaped
    like ``like_BT`` (0 in trimmed padding). Fillers (``scale=0``) run but are not written: an FSDP-sharded
    model must run the same number of forwards on every rank."""
    out_BT = torch.zeros(like_BT.shape, dtype=torch.float32, device=like_BT.device)
    for mb in mbs:
        out = fn(mb)
        if mb.scale:
            mb.put(out_BT, out)
    return out_BT


def global_counts(completion_mask_BT: torch.Tensor, d=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(num_tokens, num_seqs)`` of the whole batch, summed over ranks when ``d`` (a Dist) is given.

    ``num_seqs`` counts rows with at least one valid token, the rows ``seq_mean`` averages over.
    """
    m = completion_mask_BT.bool()
    n_tok = m.sum().double()
    n_seq = m.any(-1).sum().double()
    if d is not None:
        n_tok, n_seq = d.sum(n_tok), d.sum(n_seq)
    return n_tok.float(), n_seq.float()


def accumulating(model: torch.nn.Module, mbs: list[MicroBatch]) -> Iterator[MicroBatch]:
    """Iterate over ``mbs`` with the data-parallel gradient reduction deferred to the last micro-batch.

    The loop body (forward, ``backward()``) of every micro-batch but the last runs under DDP's
    ``no_sync`` (FSDP2: ``set_requires_gradient_sync(False)``), so the ranks reduce the accumulated
    gradient once. A single process (no wrapper) just iterates. Each micro-batch's loss must be
    normalised by the global counts (:func:`global_counts`) and multiplied by ``mb.scale`` (0 for a
    filler) and the world size (DDP averages over ranks; losses with global counts are sums)::

        opt.zero_grad(set_to_none=True)
        for mb in accumulating(ddp_model, mbs):
            loss = loss_of(mb) * mb.scale
            (loss * d.world).backward()
    """
    fsdp2 = hasattr(model, "set_requires_gradient_sync")
    for i, mb in enumerate(mbs):
        last = i == len(mbs) - 1
        if fsdp2:
            model.set_requires_gradient_sync(last)
            ctx = contextlib.nullcontext()
        else:
            ctx = contextlib.nullcontext() if last or not hasattr(model, "no_sync") else model.no_sync()
        with ctx:
            yield mb


# ---- memory and precision switches ---------------------------------------------------------------

def set_gradient_checkpointing(model, enabled: bool) -> None:
    """Turn HF activation (gradient) checkpointing on (non-reentrant) or off.

    transformers >= 5.2x names it ``activation_checkpointing_enable``; older ones
    ``gradient_checkpointing_enable`` (same behaviour). A model without it is an error.
    """
    m = model.module if hasattr(model, "module") else model
    if not getattr(m, "supports_gradient_checkpointing", False):
        raise ShiftkitError(f"{type(m).__name__} does not support gradient checkpointing")
    new_api = hasattr(m, "activation_checkpointing_enable")
    if enabled:
        if new_api:
            m.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:  # pragma: no cover - older transformers
            m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if getattr(m, "config", None) is not None:
            m.config.use_cache = False  # a KV cache is useless (and HF warns) in a checkpointed training forward
    else:
        (m.activation_checkpointing_disable if new_api else m.gradient_checkpointing_disable)()


def is_gradient_checkpointing(model) -> bool:
    m = model.module if hasattr(model, "module") else model
    if hasattr(type(m), "is_activation_checkpointing"):
        return bool(m.is_activation_checkpointing)
    return bool(getattr(m, "is_gradient_checkpointing", False))


def check_fp32_master(model: torch.nn.Module, opt: torch.optim.Optimizer | None = None) -> None:
    """Raise unless every trainable parameter (and every floating optimizer state) is fp32."""
    for n, p in model.named_parameters():
        if p.requires_grad and p.dtype != torch.float32:
            raise ShiftkitError(f"parameter {n} is {p.dtype}; mixed precision keeps fp32 master weights "
                                "(load the model in float32 and train under autocast)")
    for state in (opt.state.values() if opt is not None else []):
        for k, v in state.items():
            if torch.is_tensor(v) and v.is_floating_point() and v.dtype != torch.float32 and v.dim() > 0:
                raise ShiftkitError(f"optimizer state '{k}' is {v.dtype}, expected float32")


# ---- the memory keys every training loop shares -----------------------------------------------

@dataclasses.dataclass
class MemoryConfig:
    """The memory and precision keys of every training loop (SFT, GRPO, OPD, agentic RL): one source of defaults.

    Memory then grows with the micro-batch (``token_budget``) and the logit chunk, not with the batch
    or the vocabulary; the defaults change no number of a run (one micro-batch, fp32, full fine-tuning)."""

    token_budget: int = 0  # padded tokens (rows x prompt+completion columns; with packing, real tokens) per micro-batch of the update and of scoring; 0 = the whole batch at once
    packing: bool = False  # padding-free update and scoring: each micro-batch's rows packed into one sequence (position ids restart per row; varlen attention under flash-attention, a block-causal mask otherwise); equal to the padded update to float rounding
    rollout_rows: int = 0  # rollout rows sampled at once (bounds the KV cache); 0 = all rows of the step
    logit_chunk: int = 0  # positions per chunk of the chunked log-softmax (0 = about 64 MB of fp32 logits per chunk)
    grad_checkpointing: bool = False  # recompute each layer's activations in the backward (HF activation checkpointing)
    autocast: str = "none"  # none | bfloat16 | float16: autocast of the training forward (master weights and optimizer state stay fp32)
    lora_r: int = 0  # LoRA rank through PEFT (0 = full fine-tuning)
    lora_alpha: float = 0.0  # LoRA scaling alpha (0 = 2 x lora_r)
    lora_dropout: float = 0.0  # LoRA dropout
    lora_targets: list[str] = dataclasses.field(default_factory=lambda: ["all-linear"])  # PEFT target_modules (all-linear = every linear layer but the output head)

    def validate_memory(self, command: str) -> None:
        if self.token_budget < 0 or self.rollout_rows < 0 or self.logit_chunk < 0:
            raise ShiftkitError(f"{command}: token_budget, rollout_rows and logit_chunk must be >= 0 (0 = no limit)")
        if self.autocast not in AUTOCAST:
            raise ShiftkitError(f"{command}: autocast must be one of {', '.join(AUTOCAST)}, got '{self.autocast}'")
        if self.lora_r < 0:
            raise ShiftkitError(f"{command}: lora_r must be >= 0 (0 = full fine-tuning), got {self.lora_r}")
        if not self.lora_r:
            d = MemoryConfig()
            unread = [k for k in ("lora_alpha", "lora_dropout", "lora_targets") if getattr(self, k) != getattr(d, k)]
            if unread:
                raise ShiftkitError(f"{command}: {', '.join(unread)} only apply with lora_r > 0 (LoRA); "
                                    "set lora_r or leave them at the default")


AUTOCAST = ("none", "bfloat16", "float16")


def autocast_dtype(name: str) -> str | None:
    """The ``dtype`` argument of the forwards for an ``autocast`` key (None = fp32, no autocast)."""
    return None if name == "none" else name
