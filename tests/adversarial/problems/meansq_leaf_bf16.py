"""Hand-written: the mean square of a bfloat16 tensor, accumulated by torch in float32 and returned as a Python
float (``.item()`` of a float32 tensor). The leaf is float32-accurate although the only input is bfloat16: its
budget is float32's, not the inputs' bfloat16 one."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.float().pow(2).mean().item()


rows = 256
cols = 1024


def get_inputs():
    return [torch.randn(rows, cols, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
