"""Mean square of a bfloat16 activation tensor, accumulated in float32, returned as a Python float (a scalar leaf)."""
import torch
import torch.nn as nn

rows = 2048
cols = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.float().pow(2).mean().item()


def get_inputs():
    return [torch.randn(rows, cols, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
