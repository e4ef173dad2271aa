"""Red team: a model that returns a tensor and a Python number (a shape statistic), as some KernelBench-style
wrappers do."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2.0 + 1.0, x.shape[1]


batch_size = 64
dim = 512


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
