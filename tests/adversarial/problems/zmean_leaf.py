"""(redteam10 p12, smaller) Row standardisation that also returns the mean of its output as a Python float: the
statistic's true value is 0, and what the reference returns is its own float32 rounding residue."""
import torch
import torch.nn as nn

N = 256
D = 512


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
