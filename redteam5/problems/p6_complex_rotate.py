import torch
import torch.nn as nn

B = 1024
N = 2048


class Model(nn.Module):
    """complex64 elementwise product with a complex parameter; also the per-row sum of magnitudes (tuple)."""

    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n, dtype=torch.complex64))

    def forward(self, z):
        p = z * self.w
        return p, p.abs().sum(-1)


def get_inputs():
    return [torch.randn(B, N, dtype=torch.complex64)]


def get_init_inputs():
    return [N]
