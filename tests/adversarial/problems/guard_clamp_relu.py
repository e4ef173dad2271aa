"""(redteam10 p14, smaller) A gain and ReLU behind an in-place safety clamp of the input (``x.clamp_(-limit,
limit)``), a guard that writes no new value on ordinary inputs: the reference still writes its input."""
import torch
import torch.nn as nn

N = 256
C = 128
LIMIT = 50.0


class Model(nn.Module):
    def __init__(self, c, limit):
        super().__init__()
        self.gain = nn.Parameter(torch.randn(c))
        self.limit = limit

    def forward(self, x):
        x.clamp_(-self.limit, self.limit)
        return torch.relu(x * self.gain)


def get_inputs():
    return [torch.randn(N, C)]


def get_init_inputs():
    return [C, LIMIT]
