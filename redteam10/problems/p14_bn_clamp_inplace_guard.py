"""BatchNorm1d (eval) + ReLU behind an in-place safety clamp of the input (`x.clamp_(-limit, limit)`, a guard
against outliers that is a no-op on ordinary inputs)."""
import torch
import torch.nn as nn

N = 4096
C = 512
LIMIT = 50.0


class Model(nn.Module):
    def __init__(self, c, limit):
        super().__init__()
        self.bn = nn.BatchNorm1d(c)
        self.limit = limit

    def forward(self, x):
        x.clamp_(-self.limit, self.limit)
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(N, C)]


def get_init_inputs():
    return [C, LIMIT]
