"""A scaled one-hot: each row of a zero matrix gets one value at one column (scatter_ into zeros)."""
import torch
import torch.nn as nn

ROWS, CLASSES = 512, 8192


class Model(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.classes = classes

    def forward(self, idx, val):
        out = torch.zeros(idx.shape[0], self.classes, dtype=val.dtype)
        return out.scatter_(1, idx.unsqueeze(1), val.unsqueeze(1))


def get_inputs():
    return [torch.randint(0, CLASSES, (ROWS,)), torch.randn(ROWS)]


def get_init_inputs():
    return [CLASSES]
