"""LayerNorm followed by a learned non-negative gain applied through a square root."""
import torch
import torch.nn as nn

ROWS, COLS = 32, 512


class Model(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.ln = nn.LayerNorm(cols)
        self.gain = nn.Parameter(torch.ones(cols))

    def forward(self, x):
        return self.ln(x) * torch.sqrt(self.gain)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [COLS]
