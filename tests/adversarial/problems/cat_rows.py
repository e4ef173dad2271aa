"""Pure data movement: two matrices side by side (torch.cat along the columns)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return torch.cat((x, y), 1)


def get_inputs():
    return [torch.randn(512, 1024), torch.randn(512, 1024)]


def get_init_inputs():
    return []
