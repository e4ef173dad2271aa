"""float64 row statistics returned as a dict: per-row mean (tensor) and the grand total as a Python float."""
import torch
import torch.nn as nn

ROWS = 1024
COLS = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {"row_mean": x.mean(dim=1), "total": float(x.sum())}


def get_inputs():
    return [torch.randn(ROWS, COLS, dtype=torch.float64)]


def get_init_inputs():
    return []
