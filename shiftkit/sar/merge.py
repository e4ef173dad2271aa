"""Merge methods over N experts that share a base: one small pure function each, in a registry.

Every method maps ``(base_mn, deltas, weights, **params)`` to the merged delta (fp32), where
``deltas[i] = W_expert_i - W_base``; the caller adds it to the base and casts. Add a method by
writing one function with ``@register("name")``: its keyword parameters are its schema
(:func:`method_params`), and a merge config that sets a parameter the method does not take is an error
(``MergeConfig.validate``). ``get_method`` raises on unknown names.

The task-arithmetic family transcribes mergekit 0.1.5 (``merge_methods/generalized_task_arithmetic.py``
and ``sparsify.py``; tests/sar/test_merge.py checks agreement when mergekit is importable):
- task_arithmetic: sum_i w_i d_i (times lambda)
- ties: magnitude-trim each d_i to ``density``, elect the sign of sum_i w_i d_i, keep agreeing
  entries, divide by the sum of agreeing weights (normalize), times lambda
- dare_ties: as ties but with a Bernoulli(density) keep-mask and an L1 norm-matching rescale
  (mergekit's ``rescale``; ``rescale="density"`` divides by density as in the DARE paper)
- dare_linear: DARE masks, plain weighted sum
- sar: sum_i w_i P(d_i), P the SAR edit (rank-k truncation projected on the base's singular
  spaces); with ``target=j`` the "expert j + P(others)" mode: d_j + sum_{i != j} w_i P(d_i)
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Callable

import torch

from shiftkit.errors import ShiftkitError
from shiftkit.sar.edit import EditOptions, sar_edit_matrix

MergeFn = Callable[..., torch.Tensor]
# A method's chunked form: (per-expert delta chunk iterators, numel, **params with the method's defaults) ->
# (per expert: a chunk -> trimmed/masked delta chunk, or None; the keyword arguments of the combination)
ChunkedFn = Callable[..., tuple[list, dict]]


@dataclasses.dataclass(frozen=True)
class MergeMethod:
    fn: MergeFn  # (base_mn, deltas, weights, **params) -> the merged delta, on whole fp32 tensors
    chunked: ChunkedFn | None = None  # the same merge of a huge tensor in flat chunks (None: whole tensors only)
    whole: bool = False  # always merged as a whole tensor (SAR's SVD needs the matrix)


_METHODS: dict[str, MergeMethod] = {}


def register(name: str, chunked: ChunkedFn | None = None, whole: bool = False):
    """Register ``fn`` as merge method ``name``, with its chunked form (:func:`merge_tensor` uses it on
    tensors above ``chunk_elems`` entries) or ``whole=True``."""
    def deco(fn: MergeFn) -> MergeFn:
        if name in _METHODS:
            raise RuntimeError(f"merge method '{name}' registered twice")
        _METHODS[name] = MergeMethod(fn, chunked, whole)
        return fn
    return deco


def method_names() -> list[str]:
    return sorted(_METHODS)


def get_method(name: str) -> MergeFn:
    if name not in _METHODS:
        raise ShiftkitError(f"unknown merge method '{name}'; valid methods: {', '.join(method_names())}")
    return _METHODS[name].fn


def method_params(name: str) -> dict[str, inspect.Parameter]:
    """The parameters a method takes besides ``(base_mn, deltas, weights)``: its schema."""
    return dict(list(inspect.signature(get_method(name)).parameters.items())[3:])


def params_for(name: str, params: dict) -> dict:
    """The entries of ``params`` that method ``name`` takes."""
    takes = method_params(name)
    return {k: v for k, v in params.items() if k in takes}


# ------------------------------------------------------------------------------ building blocks

def _abs_bits(d: torch.Tensor) -> torch.Tensor:
    """Bit patterns of |d| (fp32) as int32: for non-negative floats integer order == float order."""
    return d.float().abs().contiguous().view(torch.int32)


def topk_threshold(chunks, k: int) -> tuple[int, int]:
    """Exact k-th largest |d| by a two-pass radix select over the fp32 bit patterns (no sort, no
    index tensor): ``chunks`` is a callable yielding the tensor's pieces in flat order, called twice.

    Returns ``(t, need)``: keep the entries whose |d| bits are > t, plus the first ``need`` entries
    (in flat order) whose bits equal t; exactly k entries in all.
    """
    hist = torch.zeros(1 << 15, dtype=torch.int64)
    for c in chunks():
        hist += torch.bincount((_abs_bits(c).reshape(-1) >> 16).long(), minlength=1 << 15)[: 1 << 15]
    cum = hist.flip(0).cumsum(0)  # cum[j] = count(high bits >= 2^15 - 1 - j)
    j = int(torch.searchsorted(cum, torch.tensor([k]))[0])
    b = (1 << 15) - 1 - j
    above = int(cum[j - 1]) if j > 0 else 0  # entries in higher buckets
    hist2 = torch.zeros(1 << 16, dtype=torch.int64)
    for c in chunks():
        bits = _abs_bits(c).reshape(-1)
        hist2 += torch.bincount((bits[(bits >> 16) == b] & 0xFFFF).long(), minlength=1 << 16)
    cum2 = hist2.flip(0).cumsum(0)
    j2 = int(torch.searchsorted(cum2, torch.tensor([k - above]))[0])
    t = (b << 16) | ((1 << 16) - 1 - j2)
    greater = above + (int(cum2[j2 - 1]) if j2 > 0 else 0)
    return t, k - greater


class _TopkMasker:
    """Applies a ``topk_threshold`` result chunk by chunk (ties at the threshold: lowest flat index first)."""

    def __init__(self, t: int, need: int):
        self.t, self.need = t, need

    def __call__(self, c: torch.Tensor) -> torch.Tensor:
        bits = _abs_bits(c)
        keep = bits > self.t
        if self.need > 0:
            eq = (bits == self.t).reshape(-1)
            n_eq = int(eq.sum())
            if n_eq:
                first = eq & (eq.cumsum(0) <= self.need)
                keep = keep | first.reshape(keep.shape)
                self.need -= min(n_eq, self.need)
        return keep.to(c.dtype)


def magnitude_mask(d: torch.Tensor, density: float) -> torch.Tensor:
    """1 on the ``max(1, int(density * numel))`` largest-|d| entries (mergekit's ``magnitude``), else 0.

    Same selection as mergekit's argsort, found by an exact radix select instead of sorting (argsort of
    a 311M-entry embedding delta took 21 GB); among entries tied at the threshold the lowest flat
    indices are kept (argsort leaves that order unspecified)."""
    if density >= 1:
        return torch.ones_like(d)
    if density <= 0 or d.numel() == 0:
        return torch.zeros_like(d)
    k = max(1, int(density * d.numel()))
    t, need = topk_threshold(lambda: [d], k)
    return _TopkMasker(t, need)(d)


def bernoulli_mask(d: torch.Tensor, density: float, generator: torch.Generator | None) -> torch.Tensor:
    """Keep each entry with probability ``density`` (``torch.bernoulli``, as mergekit)."""
    if density >= 1:
        return torch.ones_like(d)
    return torch.bernoulli(torch.full_like(d, density, dtype=torch.float32), generator=generator).to(d.dtype)


def l1_rescale(d: torch.Tensor, masked: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """``masked * (|d|_1 / |masked|_1)`` unless either norm is below eps (mergekit RescaleNorm.l1)."""
    before, after = d.abs().sum(), masked.abs().sum()
    if before < eps or after < eps:
        return masked
    return masked * (before / after)


def sign_consensus(wd_N: torch.Tensor) -> torch.Tensor:
    """TIES sign election over stacked weighted deltas [N, ...]: entries whose sign equals sign(sum), ties -> +."""
    majority = (wd_N.sum(0) >= 0).to(wd_N.dtype) * 2 - 1
    return (wd_N.sign() == majority).to(wd_N.dtype)


def _combine(deltas: list[torch.Tensor], weights: list[float], consensus: bool, normalize: bool,
             lambda_: float) -> torch.Tensor:
    d_N = torch.stack([d.float() for d in deltas])
    w_N = torch.tensor(weights, dtype=d_N.dtype).reshape(-1, *([1] * (d_N.dim() - 1)))
    wd_N = d_N * w_N
    if consensus:
        mask = sign_consensus(wd_N)
        mixed = (wd_N * mask).sum(0)
        divisor = (w_N * mask).sum(0)
        divisor[divisor == 0] = 1
    else:
        mixed = wd_N.sum(0)
        divisor = w_N.sum(0).expand_as(mixed).clone()
        divisor[divisor.abs() < 1e-8] = 1
    if normalize:
        mixed = mixed / divisor
    return mixed * lambda_ if lambda_ != 1 else mixed


def _dare(deltas, density, rescale, seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for d in deltas:
        d = d.float()
        masked = d * bernoulli_mask(d, density, g)
        if density < 1 and rescale == "l1":
            masked = l1_rescale(d, masked)
        elif density < 1 and rescale == "density":
            masked = masked / density
        elif rescale not in ("l1", "density", "none"):
            raise ShiftkitError(f"unknown rescale '{rescale}' (use l1, density or none)")
        out.append(masked)
    return out


# ------------------------------------------------------------------------------ methods and their chunked forms
#
# A chunked form computes the global quantities first, in chunked passes over each expert's delta (TIES:
# the exact top-k threshold; DARE: the generator state and the L1 rescale factor), so that the
# elementwise combination then runs chunk by chunk and equals the whole-tensor function's result.

def _task_arithmetic_chunked(delta_chunks, n, *, lambda_, normalize):
    return [None] * len(delta_chunks), dict(consensus=False, normalize=normalize, lambda_=lambda_)


@register("task_arithmetic", chunked=_task_arithmetic_chunked)
def task_arithmetic(base_mn, deltas, weights, lambda_: float = 1.0, normalize: bool = False) -> torch.Tensor:
    return _combine(deltas, weights, consensus=False, normalize=normalize, lambda_=lambda_)


def _ties_chunked(delta_chunks, n, *, density, lambda_, normalize):
    prep = [None] * len(delta_chunks)
    if density < 1:
        k = max(1, int(density * n))
        for j, chunks in enumerate(delta_chunks):
            masker = _TopkMasker(*topk_threshold(chunks, k))
            prep[j] = lambda c, m=masker: c * m(c)
    return prep, dict(consensus=True, normalize=normalize, lambda_=lambda_)


@register("ties", chunked=_ties_chunked)
def ties(base_mn, deltas, weights, density: float = 1.0, lambda_: float = 1.0, normalize: bool = True) -> torch.Tensor:
    trimmed = [d.float() * magnitude_mask(d.float(), density) for d in deltas]
    return _combine(trimmed, weights, consensus=True, normalize=normalize, lambda_=lambda_)


def _dare_chunked(consensus: bool) -> ChunkedFn:
    def chunked(delta_chunks, n, *, density, lambda_, normalize, rescale, seed):
        if rescale not in ("l1", "density", "none"):
            raise ShiftkitError(f"unknown rescale '{rescale}' (use l1, density or none)")
        prep = [None] * len(delta_chunks)
        if density < 1:
            g = torch.Generator().manual_seed(seed)
            for j, chunks in enumerate(delta_chunks):  # same generator stream as _dare: expert after expert
                state = g.get_state()
                before = after = torch.zeros((), dtype=torch.float32)
                for c in chunks():
                    masked = c * bernoulli_mask(c, density, g)
                    if rescale == "l1":
                        before = before + c.abs().sum()
                        after = after + masked.abs().sum()
                factor = None
                if rescale == "l1" and not (before < 1e-7 or after < 1e-7):
                    factor = before / after
                elif rescale == "density":
                    factor = 1.0 / density
                gj = torch.Generator().set_state(state)

                def apply(c, gj=gj, factor=factor):
                    masked = c * bernoulli_mask(c, density, gj)
                    if rescale == "density":
                        return masked / density
                    return masked * factor if factor is not None else masked
                prep[j] = apply
        return prep, dict(consensus=consensus, normalize=normalize, lambda_=lambda_)
    return chunked


@register("dare_ties", chunked=_dare_chunked(consensus=True))
def dare_ties(base_mn, deltas, weights, density: float = 1.0, lambda_: float = 1.0, normalize: bool = False,
              rescale: str = "l1", seed: int = 0) -> torch.Tensor:
    return _combine(_dare(deltas, density, rescale, seed), weights, consensus=True, normalize=normalize,
                    lambda_=lambda_)


@register("dare_linear", chunked=_dare_chunked(consensus=False))
def dare_linear(base_mn, deltas, weights, density: float = 1.0, lambda_: float = 1.0, normalize: bool = False,
                rescale: str = "l1", seed: int = 0) -> torch.Tensor:
    return _combine(_dare(deltas, density, rescale, seed), weights, consensus=False, normalize=normalize,
                    lambda_=lambda_)


@register("sar", whole=True)
def sar(base_mn, deltas, weights, edit=None, cache=None, target: int = -1, lambda_: float = 1.0) -> torch.Tensor:
    """sum_i w_i P(d_i) (``target=-1``) or d_target + sum_{i != target} w_i P(d_i); 1-D tensors pass through
    as task arithmetic (SAR edits matrices only)."""
    if base_mn.dim() != 2:
        return task_arithmetic(base_mn, deltas, weights, lambda_=lambda_)
    edit = edit or EditOptions()
    W0 = base_mn.float()
    out = torch.zeros_like(W0)
    for i, (d, w) in enumerate(zip(deltas, weights)):
        if i == target:
            out += d.float()
            continue
        e = sar_edit_matrix(W0, W0 + d.float(), edit, cache=cache, diagnostics=False)
        out += w * (e.B_mq @ e.A_qn)
    return out * lambda_ if lambda_ != 1 else out


# ------------------------------------------------------------------------------ chunked driver (huge tensors)

CHUNK_ELEMS = 1 << 24  # 16M entries: above this a tensor is merged in flat chunks


def merge_tensor(method: str, base: torch.Tensor, experts: list[torch.Tensor], weights: list[float],
                 chunk_elems: int = CHUNK_ELEMS, **params) -> torch.Tensor:
    """``base + method(base, [e - base], weights)`` cast to base's dtype, with bounded memory.

    Tensors up to ``chunk_elems`` entries (and every merge of a ``whole`` method, such as ``sar``) go
    through the registered function on whole fp32 tensors. Larger ones (embeddings) go through the
    method's registered chunked form in flat chunks of ``chunk_elems``, so the result equals the
    whole-tensor function's (tested with small chunks). Memory: the inputs as given (e.g. bf16) + the
    output + O(chunk) fp32 temporaries.
    """
    get_method(method)
    m, n = _METHODS[method], base.numel()
    if m.whole or n <= chunk_elems:
        W0 = base.float()
        return (W0 + m.fn(W0, [e.float() - W0 for e in experts], weights, **params)).to(base.dtype)
    if m.chunked is None:
        raise ShiftkitError(f"merge method '{method}' has no chunked path for a {n}-entry tensor")
    b_flat = base.reshape(-1)
    e_flat = [e.reshape(-1) for e in experts]
    spans = [(i, min(n, i + chunk_elems)) for i in range(0, n, chunk_elems)]

    def delta_chunks(j):
        return lambda: (e_flat[j][a:b].float() - b_flat[a:b].float() for a, b in spans)

    resolved = {k: p.default for k, p in method_params(method).items()} | params  # the method's own defaults
    prep, combine = m.chunked([delta_chunks(j) for j in range(len(experts))], n, **resolved)
    out = torch.empty_like(b_flat)
    for a, b in spans:
        W0c = b_flat[a:b].float()
        ds = [e[a:b].float() - W0c for e in e_flat]
        ds = [p(d) if p is not None else d for p, d in zip(prep, ds)]
        out[a:b] = (W0c + _combine(ds, weights, **combine)).to(base.dtype)
    return out.reshape(base.shape)
