"""Hand-written: BatchNorm1d in eval mode, fp32. At init its running mean is 0 and its running variance 1 (and
its affine weight 1, bias 0) under every seed: state a kernel must read, not assume."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bn = nn.BatchNorm1d(features)

    def forward(self, x):
        return self.bn(x)


rows = 64
features = 256


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return [features]
