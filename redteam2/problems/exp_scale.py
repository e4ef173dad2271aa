# Problem: exp(x) scaled by a learned per-column weight. float32, 2048 x 1024, x ~ N(0, 1).
import torch
import torch.nn as nn

B = 2048
N = 1024


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(n) * 0.5 + 0.75)

    def forward(self, x):
        return torch.exp(x) * self.weight


def get_inputs():
    return [torch.randn(B, N)]


def get_init_inputs():
    return [N]
