"""BatchNorm2d in inference mode, float64: running statistics (buffers), affine weight and bias (parameters)."""
import torch
import torch.nn as nn

N = 8
C = 64
H = 32
W = 32
SHAPE_VARIANTS = [{"N": 3}]


class Model(nn.Module):
    def __init__(self, num_features, eps):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features, eps=eps, dtype=torch.float64)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(N, C, H, W, dtype=torch.float64)]


def get_init_inputs():
    return [C, 1e-5]
