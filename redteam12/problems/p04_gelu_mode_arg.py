"""GELU with the approximation chosen per call (`approximate` is "tanh" or "none", as in F.gelu). The problem
passes "tanh" (GPT-2 style)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 512
COLS = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, approximate: str):
        return F.gelu(x, approximate=approximate)


def get_inputs():
    return [torch.randn(ROWS, COLS) * 2.0, "tanh"]


def get_init_inputs():
    return []
