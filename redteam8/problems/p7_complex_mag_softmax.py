"""Softmax over the magnitudes of complex (spectral) features."""
import torch
import torch.nn as nn

ROWS = 256
COLS = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, z):
        return torch.softmax(z.abs(), dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS, dtype=torch.complex64)]


def get_init_inputs():
    return []
