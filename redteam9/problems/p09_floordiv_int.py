"""Integer floor division and Python-style remainder of int32 tensors (bucket id and offset)."""
import torch
import torch.nn as nn

N = 1 << 20


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.div(a, b, rounding_mode="floor"), torch.remainder(a, b)


def get_inputs():
    return [torch.randint(0, 100000, (N,), dtype=torch.int32), torch.randint(1, 64, (N,), dtype=torch.int32)]


def get_init_inputs():
    return []
