# Problem: silu(x) * w in float16 (input, weight and output are fp16). 2048 x 2048.
import torch
import torch.nn as nn
import torch.nn.functional as F

B = 2048
N = 2048


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter((torch.rand(n) + 0.5).to(torch.float16))

    def forward(self, x):
        return F.silu(x) * self.w


def get_inputs():
    return [torch.randn(B, N).to(torch.float16)]


def get_init_inputs():
    return [N]
