"""Concatenate two activation blocks along the batch (row) dimension."""
import torch
import torch.nn as nn

ROWS = 1024
COLS = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.cat([a, b], dim=0)


def get_inputs():
    return [torch.randn(ROWS, COLS), torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
