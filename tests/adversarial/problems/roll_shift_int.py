"""(redteam9, smaller) Circular shift of each row by an integer amount passed to forward, then a per-column gain."""
import torch
import torch.nn as nn

ROWS = 128
COLS = 200
SHIFT = 37


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, w, shift: int):
        return torch.roll(x, shifts=shift, dims=1) * w


def get_inputs():
    return [torch.randn(ROWS, COLS), torch.randn(COLS), SHIFT]


def get_init_inputs():
    return []
