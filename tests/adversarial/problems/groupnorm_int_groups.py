"""(redteam11 p03, smaller) GroupNorm without affine, the group count passed to ``forward`` as a Python int: its
valid values are the divisors of the channel count, so most moves of it make the reference raise."""
import torch
import torch.nn as nn
import torch.nn.functional as F

B = 8
C = 64
L = 32
GROUPS = 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, groups):
        return F.group_norm(x, groups)


def get_inputs():
    return [torch.randn(B, C, L), GROUPS]


def get_init_inputs():
    return []
