"""Squeeze-and-excitation gate, returned broadcast to the feature map's shape (an expand view, as the
caller multiplies it in place later)."""
import torch
import torch.nn as nn

BATCH = 8
CHANNELS = 64
REDUCTION = 4
HEIGHT = 32
WIDTH = 32


class Model(nn.Module):
    def __init__(self, channels, reduction):
        super().__init__()
        self.fc1 = nn.Linear(channels, channels // reduction)
        self.fc2 = nn.Linear(channels // reduction, channels)

    def forward(self, x):
        s = x.mean(dim=(2, 3))
        g = torch.sigmoid(self.fc2(torch.relu(self.fc1(s))))
        return g[:, :, None, None].expand_as(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS, REDUCTION]
