"""Max-norm renormalisation of each row, in place (as nn.Embedding's max_norm does to its rows), then a gated
tanh. Rows of N(0,1) with D = 256 have norm ~16 < MAX_NORM, so the renorm changes no value on the problem's
own inputs; it does on scaled-up ones."""
import torch
import torch.nn as nn

R = 4096
D = 256
MAX_NORM = 64.0


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(D))

    def forward(self, x):
        n = x.norm(dim=-1, keepdim=True)
        x.mul_(torch.clamp(MAX_NORM / (n + 1e-7), max=1.0))
        return torch.tanh(x) * self.gain


def get_inputs():
    return [torch.randn(R, D)]


def get_init_inputs():
    return []
