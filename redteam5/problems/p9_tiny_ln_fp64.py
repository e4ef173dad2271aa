import torch
import torch.nn as nn

ROWS = 8
D = 64


class Model(nn.Module):
    """A tiny fp64 LayerNorm (eager cost is dominated by per-call overhead: the tiny-problem regime)."""

    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d, eps=1e-5, dtype=torch.float64)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(ROWS, D, dtype=torch.float64)]


def get_init_inputs():
    return [D]
