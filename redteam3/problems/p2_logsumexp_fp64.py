"""Row-wise logsumexp in float64 (budget 1e-10): a reduction whose naive form overflows."""
import torch
import torch.nn as nn

batch_size = 64
n = 1024
SHAPE_VARIANTS = [{"n": 1000}, {"batch_size": 3}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.logsumexp(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, n, dtype=torch.float64) * 3.0]


def get_init_inputs():
    return []
