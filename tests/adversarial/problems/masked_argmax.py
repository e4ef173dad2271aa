"""Argmax over the masked-in entries of each row (first maximum; an all-masked row gives 0, as torch does)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, m):
        return x.masked_fill(~m, float("-inf")).argmax(-1)


def get_inputs():
    return [torch.randn(256, 256), torch.rand(256, 256) < 0.5]


def get_init_inputs():
    return []
