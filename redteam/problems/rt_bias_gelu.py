"""Red team: exact (erf) GELU of x + bias on a 1024 x 2048 activation (memory-bound elementwise chain)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x):
        return F.gelu(x + self.bias)


batch_size = 1024
features = 2048
SHAPE_VARIANTS = [{"batch_size": 5}]


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
