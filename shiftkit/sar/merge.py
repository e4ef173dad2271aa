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

import inspect
from typing import Callable

import torch

from shiftkit.errors import ShiftkitError

MergeFn = Callable[..., torch.Tensor]
_METHODS: dict[str, MergeFn] = {}


def register(name: str):
    def deco(fn: MergeFn) -> MergeFn:
        if name in _METHODS:
            raise RuntimeError(f"merge method '{name}' registered twice")
        _METHODS[name] = fn
        return fn
    return deco


def method_names() -> list[str]:
    return sorted(_METHODS)


def get_method(name: str) -> MergeFn:
    if name not in _METHODS:
        raise ShiftkitError(f"unknown merge method '{name}'; valid methods: {', '.join(method_names())}")
    return _METHODS[name]


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


# ------------------------------------------------------------------------------ methods

@register("task_arithmetic")
def task_arithmetic(base_mn, deltas, weights, lambda_: float = 1.0, normalize: bool = False) -> torch.Tensor:
    return _combine(deltas, weights, consensus=False, normalize=normalize, lambda_=lambda_)


@register("ties")
def ties(base_mn, deltas, weights, density: float = 1.0, lambda_: float = 1.0, normalize: bool = True) -> torch.Tensor:
    trimmed = [d.float() * magnitude_mask(d.float(), density) for d in deltas]
    return _combine(trimmed, weights, consensus=True, normalize=normalize, lambda_=lambda_)


@register("dare_ties")
def dare_ties(base_mn, deltas, weights, density: float = 1.0, lambda_: float = 1.0, normalize: bool = False,
              rescale: str = "l1", seed: int = 0) -> torch.Tensor:
    return _combine(_dare(deltas, density, rescale, seed), weights, consensus=True, normalize=normalize,
                    lambda_=lambda_)


@register("dare_linear")
def dare_linear(base_mn, deltas, weights, density: float = 1.0, lambda_: float = 1.0, normalize: bool = False,
                rescale: str = "l1", seed: int = 0) -> torch.Tensor:
    return _combine(_dare(deltas, density, rescale, seed), weights, consensus=False, normalize=normalize,
                    lambda_=lambda_)


@register("sar")
def sar(base_mn, deltas, weights, edit=None, cache=None, target: int = -1, lambda_: float = 1.0) -> torch.Tensor:
    """sum_i w_i P(d_i) (``target=-1``) or d_target + sum_{i != target} w_i P(d_i); 1-D tensors pass through
    as task arithmetic (SAR edits matrices only)."""
    from shiftkit.sar.edit import EditOptions, sar_edit_matrix

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

    Tensors up to ``chunk_elems`` entries (and every ``sar`` merge) go through the registered function
    on whole fp32 tensors. Larger ones (embeddings) are processed in flat chunks of ``chunk_elems``:
    global quantities are computed first in chunked passes (TIES: each delta's exact top-k threshold;
    DARE: each expert's generator state and L1 rescale factor) and the elementwise combination then
    runs chunk by chunk, so the result equals the whole-tensor function's (tested with small chunks).
    Memory: the inputs as given (e.g. bf16) + the output + O(chunk) fp32 temporaries.
    """
    fn = get_method(method)
    n = base.numel()
    if method == "sar" or n <= chunk_elems:
        W0 = base.float()
        return (W0 + fn(W0, [e.float() - W0 for e in experts], weights, **params)).to(base.dtype)
    if method not in ("task_arithmetic", "ties", "dare_ties", "dare_linear"):
        raise ShiftkitError(f"merge method '{method}' has no chunked path for a {n}-entry tensor")
    b_flat = base.reshape(-1)
    e_flat = [e.reshape(-1) for e in experts]
    spans = [(i, min(n, i + chunk_elems)) for i in range(0, n, chunk_elems)]

    def delta_chunks(j):
        return lambda: (e_flat[j][a:b].float() - b_flat[a:b].float() for a, b in spans)

    density = params.get("density", 1.0)
    lambda_ = params.get("lambda_", 1.0)
    prep = [None] * len(experts)  # per expert: a chunk -> trimmed/masked delta chunk
    if method == "ties":
        normalize, consensus = params.get("normalize", True), True
        if density < 1:
            k = max(1, int(density * n))
            for j in range(len(experts)):
                t, need = topk_threshold(delta_chunks(j), k)
                masker = _TopkMasker(t, need)
                prep[j] = lambda c, m=masker: c * m(c)
    elif method in ("dare_ties", "dare_linear"):
        normalize, consensus = params.get("normalize", False), method == "dare_ties"
        rescale, seed = params.get("rescale", "l1"), params.get("seed", 0)
        if rescale not in ("l1", "density", "none"):
            raise ShiftkitError(f"unknown rescale '{rescale}' (use l1, density or none)")
        if density < 1:
            g = torch.Generator().manual_seed(seed)
            for j in range(len(experts)):  # same generator stream as _dare: expert after expert
                state = g.get_state()
                before = after = torch.zeros((), dtype=torch.float32)
                for c in delta_chunks(j)():
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

                def apply(c, gj=gj, factor=factor, rescale=rescale):
                    masked = c * bernoulli_mask(c, density, gj)
                    if rescale == "density":
                        return masked / density
                    return masked * factor if factor is not None else masked
                prep[j] = apply
    else:
        normalize, consensus = params.get("normalize", False), False
    out = torch.empty_like(b_flat)
    for a, b in spans:
        W0c = b_flat[a:b].float()
        ds = [e[a:b].float() - W0c for e in e_flat]
        ds = [p(d) if p is not None else d for p, d in zip(prep, ds)]
        out[a:b] = (W0c + _combine(ds, weights, consensus=consensus, normalize=normalize, lambda_=lambda_)).to(base.dtype)
    return out.reshape(base.shape)
