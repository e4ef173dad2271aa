"""Tuple output with an integer tensor and a Python-float leaf: (row max, row argmax, mean |x|)."""
import torch
import torch.nn as nn

rows = 128
cols = 512
SHAPE_VARIANTS = [{"cols": 333}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.amax(dim=1), x.argmax(dim=1), float(x.abs().mean())


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
