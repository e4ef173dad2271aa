"""Helpers of the workspace solution (plain Python, no compute)."""
import torch


def bag_bounds_ok(indices, offsets) -> bool:
    return indices.dim() == 1 and offsets.dim() == 1 and indices.dtype == torch.int64 and offsets.dtype == torch.int64


def new_output(bags: int, weight):
    return torch.empty(bags, weight.shape[1], dtype=weight.dtype)
