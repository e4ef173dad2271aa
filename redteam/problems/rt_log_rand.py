"""Red team: natural log of strictly positive uniform inputs (512 x 1024)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log(x)


batch_size = 512
dim = 1024


def get_inputs():
    return [torch.rand(batch_size, dim) + 0.01]


def get_init_inputs():
    return []
