"""Polar decomposition of a complex64 signal: magnitude and phase (tuple of float32)."""
import torch
import torch.nn as nn

N = 1 << 19


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, z):
        return z.abs(), z.angle()


def get_inputs():
    return [torch.randn(N, dtype=torch.complex64)]


def get_init_inputs():
    return []
