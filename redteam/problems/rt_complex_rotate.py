"""Red team: complex phase rotation y = x * exp(i * theta) (complex64, 256 x 1024; theta per element)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, theta):
        return x * torch.exp(1j * theta)


batch_size = 256
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=torch.complex64), torch.rand(batch_size, dim) * 6.283185307179586]


def get_init_inputs():
    return []
