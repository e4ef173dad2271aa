"""Red team: a float16 affine map with a clamp, y = clamp(x * 1.5 + 0.25, -4, 4) (512 x 1024, fp16 in and out)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp(x * 1.5 + 0.25, -4.0, 4.0)


batch_size = 512
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim).half()]


def get_init_inputs():
    return []
