"""Red team: row softmax of a scaled standard-normal matrix (256 x 1024)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 256
dim = 1024
SHAPE_VARIANTS = [{"batch_size": 3, "dim": 77}]


def get_inputs():
    return [torch.randn(batch_size, dim) * 3]


def get_init_inputs():
    return []
