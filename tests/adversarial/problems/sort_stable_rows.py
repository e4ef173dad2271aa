"""(redteam9, smaller) Stable sort of every row, returning torch.sort's result (values, indices) as torch returns it."""
import torch
import torch.nn as nn

ROWS = 64
COLS = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sort(x, dim=-1, stable=True)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
