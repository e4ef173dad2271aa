"""Hand-written: an fp64 problem, y = exp(x) * w in double precision."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n, dtype=torch.float64))

    def forward(self, x):
        return torch.exp(x) * self.w


batch_size = 128
n = 1024


def get_inputs():
    return [torch.randn(batch_size, n, dtype=torch.float64)]


def get_init_inputs():
    return [n]
