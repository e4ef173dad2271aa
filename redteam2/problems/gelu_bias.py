# Problem: GELU (exact, erf form) of x plus a learned per-column bias. float32, 1024 x 2048.
import torch
import torch.nn as nn
import torch.nn.functional as F

B = 1024
N = 2048


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n) * 0.5)

    def forward(self, x):
        return F.gelu(x + self.bias)


def get_inputs():
    return [torch.randn(B, N)]


def get_init_inputs():
    return [N]


SHAPE_VARIANTS = [{"B": 333}]
