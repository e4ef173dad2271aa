"""PSPNet-style global-context branch: global average pool to 1x1, then bilinear upsample back to the
feature size. Every (b, c) output plane is constant (the plane's mean)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 2
CHANNELS = 8
HEIGHT = 256
WIDTH = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        p = F.adaptive_avg_pool2d(x, 1)
        return F.interpolate(p, size=x.shape[2:], mode="bilinear", align_corners=False)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return []
