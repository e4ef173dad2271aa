"""Bucketize values against sorted boundaries (a quantiser / histogram binning step)."""
import torch
import torch.nn as nn

ROWS = 1024
COLS = 1024
NB = 63


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, boundaries):
        return torch.bucketize(x, boundaries)


def get_inputs():
    return [torch.randn(ROWS, COLS), torch.sort(torch.randn(NB)).values]


def get_init_inputs():
    return []
