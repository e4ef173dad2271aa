"""Hand-written: softmax over rows of 2048 standard normals (fp32)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


rows = 128
cols = 2048


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
