"""(redteam11 p02, smaller) An affine applied in place to a fused QKV buffer; the reference returns the Q third
as a view: the other two thirds are written too, and are part of its behaviour."""
import torch
import torch.nn as nn

T = 64
D = 96


class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3 * d))
        self.b = nn.Parameter(torch.randn(3 * d))
        self.d = d

    def forward(self, qkv):
        qkv.mul_(self.w).add_(self.b)
        return qkv.narrow(1, 0, self.d)


def get_inputs():
    return [torch.randn(T, 3 * D)]


def get_init_inputs():
    return [D]
