# Problem: row-wise sum of squares (a reduction). float32 input 4096 x 1024 -> float32 output (4096,).
import torch
import torch.nn as nn

B = 4096
N = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (x * x).sum(dim=1)


def get_inputs():
    return [torch.randn(B, N)]


def get_init_inputs():
    return []


SHAPE_VARIANTS = [{"N": 777}]
