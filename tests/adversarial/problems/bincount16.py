"""Value-dependent output size: bincount of int16 data (its length is the largest value plus one)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.bincount(x.flatten().to(torch.int64).clamp(min=0))


def get_inputs():
    return [torch.randint(0, 100, (16, 64), dtype=torch.int16)]


def get_init_inputs():
    return []
