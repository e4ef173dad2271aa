"""A pure layout op: (B, T, D) -> (B, D, T), materialised."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.transpose(1, 2).contiguous()


def get_inputs():
    return [torch.randn(16, 256, 512)]


def get_init_inputs():
    return []
