"""Red team: float64 RMSNorm over the last dimension (256 x 2048), y = x / sqrt(mean(x^2) + eps) * weight."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(features, dtype=torch.float64) + 0.5)

    def forward(self, x):
        ms = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(ms + self.eps) * self.weight


batch_size = 256
features = 2048


def get_inputs():
    return [torch.randn(batch_size, features, dtype=torch.float64)]


def get_init_inputs():
    return [features]
