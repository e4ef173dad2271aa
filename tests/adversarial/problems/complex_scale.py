"""Hand-written: a complex64 problem, y = z * (a + ib) elementwise (complex multiply)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.re = nn.Parameter(torch.randn(n))
        self.im = nn.Parameter(torch.randn(n))

    def forward(self, z):
        return z * torch.complex(self.re, self.im)


batch_size = 256
n = 512


def get_inputs():
    return [torch.complex(torch.randn(batch_size, n), torch.randn(batch_size, n))]


def get_init_inputs():
    return [n]
