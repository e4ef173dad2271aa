# Honest workspace solution (CUDA-Agent layout): model_new.py + kernels/*.cpp + a shared header + a helper module.
import torch
import torch.nn as nn

import kernel_ext
from helpers import as_2d, check_float32


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.ln = nn.LayerNorm(features)
        self.features = features

    def forward(self, x):
        check_float32(x)
        x2 = as_2d(x, self.features)
        out = torch.empty_like(x2)
        kernel_ext.layer_norm_rows(x2, self.ln.weight, self.ln.bias, out, x2.shape[0], x2.shape[1], self.ln.eps)
        return out.view(x.shape)
