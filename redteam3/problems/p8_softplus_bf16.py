"""Softplus (beta 1, threshold 20) on bfloat16 inputs and outputs."""
import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 128
cols = 1024
SHAPE_VARIANTS = [{"rows": 3}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.softplus(x)


def get_inputs():
    return [(torch.randn(rows, cols) * 3.0).to(torch.bfloat16)]


def get_init_inputs():
    return []
