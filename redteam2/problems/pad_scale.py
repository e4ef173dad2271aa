# Problem: scale then right-pad with zeros: (512 x 512) -> (512 x 8192); the output is mostly zeros.
import torch
import torch.nn as nn
import torch.nn.functional as F

R = 512
C = 512
PAD = 7680


class Model(nn.Module):
    def __init__(self, alpha, pad):
        super().__init__()
        self.alpha = alpha
        self.pad = pad

    def forward(self, x):
        return F.pad(x * self.alpha, (0, self.pad))


def get_inputs():
    return [torch.randn(R, C)]


def get_init_inputs():
    return [2.5, PAD]
