"""Small pieces shared by the training loops: optimizer, LR schedule, threads, model init."""

from __future__ import annotations

import math
import os

import torch

from shiftkit.errors import ShiftkitError


def set_threads(n: int) -> None:
    """Use ``n`` torch threads (0 = leave torch's default). Data-parallel workers should use 1."""
    if n > 0:
        torch.set_num_threads(n)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float, betas=(0.9, 0.98)) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    seen = set()
    for n, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (no_decay if p.ndim < 2 else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=betas, foreach=True)


def lr_at(step: int, base_lr: float, warmup: int, total: int, schedule: str = "cosine", min_ratio: float = 0.1) -> float:
    """Linear warm-up, then ``constant`` or ``cosine`` decay to ``min_ratio * base_lr``."""
    if warmup > 0 and step < warmup:
        return base_lr * (step + 1) / warmup
    if schedule == "constant":
        return base_lr
    if schedule == "cosine":
        frac = min(1.0, (step - warmup) / max(1, total - warmup))
        return base_lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))
    raise ShiftkitError(f"unknown lr schedule '{schedule}' (use constant or cosine)")


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    for g in opt.param_groups:
        g["lr"] = lr


def grad_norm_clip(model: torch.nn.Module, max_norm: float) -> float:
    params = [p for p in model.parameters() if p.grad is not None]
    if not params:
        return 0.0
    if max_norm > 0:
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))
    return float(torch.norm(torch.stack([p.grad.detach().norm() for p in params])))
