"""Exact (erf) GELU on float16 inputs and outputs."""
import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 128
cols = 1024
SHAPE_VARIANTS = [{"cols": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x)


def get_inputs():
    return [torch.randn(rows, cols, dtype=torch.float16)]


def get_init_inputs():
    return []
