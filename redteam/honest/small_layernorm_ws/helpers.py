"""Small shape/dtype helpers for the layer norm wrapper."""
import torch


def check_float32(x: torch.Tensor) -> None:
    if x.dtype != torch.float32:
        raise TypeError(f"layer_norm_rows expects float32, got {x.dtype}")


def as_2d(x: torch.Tensor, features: int) -> torch.Tensor:
    return x.contiguous().view(-1, features)
