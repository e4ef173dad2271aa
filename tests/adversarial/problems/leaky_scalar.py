"""(redteam9, smaller) LeakyReLU whose negative slope is a Python float passed to forward."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 128
COLS = 256
SLOPE = 0.01


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, negative_slope: float):
        return F.leaky_relu(x, negative_slope)


def get_inputs():
    return [torch.randn(ROWS, COLS), SLOPE]


def get_init_inputs():
    return []
