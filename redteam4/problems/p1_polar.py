"""Cartesian to polar coordinates: (hypot(x, y), atan2(y, x)). fp32, two inputs, a tuple of two outputs."""
import torch
import torch.nn as nn

rows = 512
cols = 2048
SHAPE_VARIANTS = [{"cols": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.hypot(x, y), torch.atan2(y, x)


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows, cols)]


def get_init_inputs():
    return []
