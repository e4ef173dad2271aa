"""(redteam10 p13, smaller) Gated residual whose gate parameter is returned with the output (the caller adds an L1 penalty on it): a
reference that returns one of its own nn.Parameters as an output leaf."""
import torch
import torch.nn as nn

N = 256
D = 128


class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.gate = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        y = x + torch.sigmoid(self.gate) * torch.tanh(x)
        return y, self.gate


def get_inputs():
    return [torch.randn(N, D)]


def get_init_inputs():
    return [D]
