"""Swish / SiLU written as the reference does it: x * sigmoid(x). fp32, elementwise."""
import torch
import torch.nn as nn

batch_size = 64
dim = 2048
SHAPE_VARIANTS = [{"batch_size": 5}, {"dim": 1001}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
