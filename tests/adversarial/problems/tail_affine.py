"""y = 2x + 1 on (ROWS, COLS); COLS varies (declared 48; the harness draws more)."""
import torch
import torch.nn as nn

ROWS = 32
COLS = 64
SHAPE_VARIANTS = [{"COLS": 48}]


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
