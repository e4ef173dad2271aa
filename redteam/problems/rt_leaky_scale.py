"""Red team: leaky ReLU, scale and residual, y = x + 0.5 * leaky_relu(x * w, 0.01) (1024 x 1024, w per feature)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.w = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return x + 0.5 * F.leaky_relu(x * self.w, 0.01)


batch_size = 1024
features = 1024
SHAPE_VARIANTS = [{"batch_size": 9}]


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
