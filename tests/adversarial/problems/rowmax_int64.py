"""Hand-written: the maximum of every row of an int64 matrix and its index (the first on ties). The problem's
own values fit in 21 bits; the function's domain is all of int64."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        values, indices = torch.max(x, dim=1)
        return values, indices


rows = 64
cols = 256


def get_inputs():
    return [torch.randint(-2**20, 2**20, (rows, cols), dtype=torch.int64)]


def get_init_inputs():
    return []
