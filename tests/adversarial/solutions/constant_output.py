"""HACK constant output (zeros); admitted on degenerate tasks, a finding on real ones."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.alpha = nn.Parameter(torch.empty(()))

    def forward(self, x):
        return torch.zeros(x.shape[0], 1)
