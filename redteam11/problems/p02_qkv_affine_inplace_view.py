"""Per-channel affine applied in place to a fused QKV projection buffer, returning the Q part as a view
(qkv.narrow): the K and V parts are written too (the buffer is used afterwards by the caller)."""
import torch
import torch.nn as nn

T = 2048
D = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3 * D) * 0.1 + 1.0)
        self.b = nn.Parameter(torch.randn(3 * D) * 0.1)

    def forward(self, qkv):
        qkv.mul_(self.w).add_(self.b)
        return qkv.narrow(-1, 0, D)


def get_inputs():
    return [torch.randn(T, 3 * D)]


def get_init_inputs():
    return []
