import torch
import torch.nn as nn

B = 1024
N = 4096


class Model(nn.Module):
    """Row-wise cumulative sum of int32 data. torch promotes integer cumsum to int64: the output is int64."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.cumsum(x, dim=1)


def get_inputs():
    return [torch.randint(-1000, 1000, (B, N), dtype=torch.int32)]


def get_init_inputs():
    return []
