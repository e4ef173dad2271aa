"""(redteam10 p14, without the guard) An eval-mode BatchNorm and a ReLU: the reference's state dict holds
BatchNorm's int64 ``num_batches_tracked``, which eval mode never reads."""
import torch
import torch.nn as nn

N = 256
C = 128


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm1d(c)

    def forward(self, x):
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(N, C)]


def get_init_inputs():
    return [C]
