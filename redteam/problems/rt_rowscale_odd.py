"""Red team: per-row scale and shift on rows of odd width (1000 columns), y = x * s[:, None] + t[:, None]."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, s, t):
        return x * s.unsqueeze(1) + t.unsqueeze(1)


rows = 1024
cols = 1000


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows), torch.randn(rows)]


def get_init_inputs():
    return []
