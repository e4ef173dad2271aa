"""Row standardisation that also returns the mean of its output as a Python float (a monitoring statistic). The
true value of that statistic is 0: what the reference returns is its own float32 rounding residue (~1e-10)."""
import torch
import torch.nn as nn

N = 1024
D = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        sd = x.std(-1, keepdim=True)
        z = (x - mu) / sd
        return z, float(z.mean())


def get_inputs():
    return [torch.randn(N, D)]


def get_init_inputs():
    return []
