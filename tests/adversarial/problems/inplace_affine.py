"""(redteam9, smaller) Per-channel affine applied IN PLACE to the input (x.mul_(w).add_(b); return x): a common
'save memory' idiom in inference code (KernelBench-style models that do `x += bias; return x`)."""
import torch
import torch.nn as nn

N = 256
C = 128


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(c))
        self.bias = nn.Parameter(torch.randn(c))

    def forward(self, x):
        x.mul_(self.weight).add_(self.bias)
        return x


def get_inputs():
    return [torch.randn(N, C)]


def get_init_inputs():
    return [C]
