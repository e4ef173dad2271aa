# Problem: expm1(x) * scale in float64 (the fp64 budget is 1e-10), x ~ U[0, 1), 1024 x 1024.
import torch
import torch.nn as nn

B = 1024
N = 1024


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(n, dtype=torch.float64) + 0.5)

    def forward(self, x):
        return torch.expm1(x) * self.scale


def get_inputs():
    return [torch.rand(B, N, dtype=torch.float64)]


def get_init_inputs():
    return [N]
