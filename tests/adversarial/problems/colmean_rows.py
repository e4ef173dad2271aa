"""Hand-written: every output row is the column mean of x (a broadcast result, materialised by the reference)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.mean(dim=0, keepdim=True).repeat(x.shape[0], 1)


batch_size = 512
features = 1024
SHAPE_VARIANTS = [{"batch_size": 5}]


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []
