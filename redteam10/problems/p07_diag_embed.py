"""Batched diagonal matrices: torch.diag_embed of (B, N) -> (B, N, N); everything off the diagonal is zero."""
import torch
import torch.nn as nn

B = 16
N = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.diag_embed(x)


def get_inputs():
    return [torch.randn(B, N)]


def get_init_inputs():
    return []
