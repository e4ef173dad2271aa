"""LayerNorm over the last dimension with learned gain and bias (eps 1e-5)."""
import torch
import torch.nn as nn

ROWS = 1024
COLS = 768
SHAPE_VARIANTS = [{"ROWS": 512}, {"ROWS": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(COLS)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
