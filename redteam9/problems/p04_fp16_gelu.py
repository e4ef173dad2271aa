"""tanh-GELU on float16 activations (output float16)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 1024
COLS = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(ROWS, COLS).half()]


def get_init_inputs():
    return []
