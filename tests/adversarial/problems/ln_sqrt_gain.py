"""LayerNorm, then a learned gain under a square root: an additive perturbation of the gain (init 1) turns some
entries negative (NaN), so the parameters cannot all be moved together."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.ln = nn.LayerNorm(n)
        self.gain = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return self.ln(x) * torch.sqrt(self.gain)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return [256]
