"""Two stacked Linear layers without an activation in between (a low-rank-ish projection block)."""
import torch
import torch.nn as nn

BATCH = 256
DIM = 256
HIDDEN = 1024


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.down(self.up(x))


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN]
