import torch
import torch.nn as nn

B = 1024
N1 = 2048
N2 = 2048


class Model(nn.Module):
    """Concatenate two fp32 matrices along the last dim (pure data movement)."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.cat((x, y), dim=1)


def get_inputs():
    return [torch.randn(B, N1), torch.randn(B, N2)]


def get_init_inputs():
    return []
