"""Row maximum of an int64 matrix: (values, indices), the first maximum on ties as torch documents."""
import torch
import torch.nn as nn

rows = 1024
cols = 2048
SHAPE_VARIANTS = [{"cols": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        values, indices = torch.max(x, dim=1)
        return values, indices


def get_inputs():
    return [torch.randint(-2**20, 2**20, (rows, cols), dtype=torch.int64)]


def get_init_inputs():
    return []
