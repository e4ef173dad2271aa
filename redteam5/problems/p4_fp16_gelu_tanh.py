import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 4096
COLS = 2048
SHAPE_VARIANTS = [{"COLS": 1000}]


class Model(nn.Module):
    """tanh-approximate GELU on fp16."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(ROWS, COLS).to(torch.float16)]


def get_init_inputs():
    return []
