"""Hand-written: an affine map of 64-bit integers (3x + 7, exact). The problem's own inputs fit in 32 bits;
the function's domain does not."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 3 + 7


rows = 256
cols = 1024


def get_inputs():
    return [torch.randint(-100_000, 100_000, (rows, cols), dtype=torch.int64)]


def get_init_inputs():
    return []
