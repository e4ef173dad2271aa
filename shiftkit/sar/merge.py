"""Merge methods over N experts that share a base: one small pure function each, in a registry.

Every method maps ``(base_mn, deltas, weights, **params)`` to the merged delta (fp32), where
``deltas[i] = W_expert_i - W_base``; the caller adds it to the base and casts. Add a method by
writing one function with ``@register("name")``. ``get_method`` raises on unknown names.

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


# ------------------------------------------------------------------------------ building blocks

def magnitude_mask(d: torch.Tensor, density: float) -> torch.Tensor:
    """1 on the ``max(1, int(density * numel))`` largest-|d| entries (mergekit's argsort order), else 0."""
    if density >= 1:
        return torch.ones_like(d)
    if density <= 0 or d.numel() == 0:
        return torch.zeros_like(d)
    k = max(1, int(density * d.numel()))
    mask = torch.zeros(d.numel(), dtype=d.dtype)
    mask[torch.argsort(d.abs().reshape(-1).float(), descending=True)[:k]] = 1
    return mask.reshape_as(d)


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
def task_arithmetic(base_mn, deltas, weights, lambda_: float = 1.0, normalize: bool = False, **_) -> torch.Tensor:
    return _combine(deltas, weights, consensus=False, normalize=normalize, lambda_=lambda_)


@register("ties")
def ties(base_mn, deltas, weights, density: float = 1.0, lambda_: float = 1.0, normalize: bool = True,
         **_) -> torch.Tensor:
    trimmed = [d.float() * magnitude_mask(d.float(), density) for d in deltas]
    return _combine(trimmed, weights, consensus=True, normalize=normalize, lambda_=lambda_)


@register("dare_ties")
def dare_ties(base_mn, deltas, weights, density: float = 1.0, lambda_: float = 1.0, normalize: bool = False,
              rescale: str = "l1", seed: int = 0, **_) -> torch.Tensor:
    return _combine(_dare(deltas, density, rescale, seed), weights, consensus=True, normalize=normalize,
                    lambda_=lambda_)


@register("dare_linear")
def dare_linear(base_mn, deltas, weights, density: float = 1.0, lambda_: float = 1.0, normalize: bool = False,
                rescale: str = "l1", seed: int = 0, **_) -> torch.Tensor:
    return _combine(_dare(deltas, density, rescale, seed), weights, consensus=False, normalize=normalize,
                    lambda_=lambda_)


@register("sar")
def sar(base_mn, deltas, weights, edit=None, cache=None, target: int = -1, lambda_: float = 1.0, **_) -> torch.Tensor:
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
