"""int32 in, int64 out (torch's promotion for an integer cumsum): the result is wider than the input."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, 1)


def get_inputs():
    return [torch.randint(-1000, 1000, (64, 512), dtype=torch.int32)]


def get_init_inputs():
    return []
