"""Python-level glue for the layer-norm workspace: validation and allocation only (no numpy, no compute)."""
import torch


def check_input(x, n):
    if x.dim() != 2 or x.shape[1] != n:
        raise ValueError(f"expected a (rows, {n}) input, got {tuple(x.shape)}")
    if x.dtype != torch.float32:
        raise TypeError(f"expected float32, got {x.dtype}")
    return x.contiguous()


def alloc_outputs(x):
    rows = x.shape[0]
    return torch.empty_like(x), torch.empty(rows, 1, dtype=x.dtype), torch.empty(rows, 1, dtype=x.dtype)
