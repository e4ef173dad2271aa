"""Per-channel affine (a frozen BatchNorm folded to scale/shift) followed by a conversion to NHWC."""
import torch
import torch.nn as nn

BATCH = 8
CHANNELS = 64
HEIGHT = 32
WIDTH = 32


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x):
        y = x * self.weight[None, :, None, None] + self.bias[None, :, None, None]
        return y.permute(0, 2, 3, 1).contiguous()


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]
