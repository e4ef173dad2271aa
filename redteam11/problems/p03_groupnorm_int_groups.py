"""GroupNorm with the number of groups passed to forward as a Python int (16 groups of 256 channels)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

B = 8
C = 256
H = 32
W = 32
GROUPS = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))
        self.bias = nn.Parameter(torch.zeros(C))

    def forward(self, x, num_groups):
        return F.group_norm(x, num_groups, self.weight, self.bias, 1e-5)


def get_inputs():
    return [torch.randn(B, C, H, W), GROUPS]


def get_init_inputs():
    return []
