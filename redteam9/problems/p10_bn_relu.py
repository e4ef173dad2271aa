"""BatchNorm1d in inference (running statistics) followed by ReLU."""
import torch
import torch.nn as nn

BATCH = 1024
FEAT = 1024


class Model(nn.Module):
    def __init__(self, feat):
        super().__init__()
        self.bn = nn.BatchNorm1d(feat)

    def forward(self, x):
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(BATCH, FEAT)]


def get_init_inputs():
    return [FEAT]
