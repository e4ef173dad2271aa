# HONEST: a CUDA-Agent-style workspace directory (model_new.py + kernels/*.cpp + kernels/*.h + a Python helper
# module): two translation units (stats.cpp computes per-row mean/rstd in double; normalize.cpp applies the
# affine transform and calls the stats helper across the TU boundary through a shared header), built by the
# harness into `kernel_ext` (a lean C ABI library, no torch headers). Three outputs (y, mean, rstd).
# Problem: layernorm_stats.
import torch
import torch.nn as nn

import kernel_ext
from ln_glue import alloc_outputs, check_input


class ModelNew(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.eps = float(eps)
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        x = check_input(x, self.weight.shape[0])
        y, mean, rstd = alloc_outputs(x)
        kernel_ext.layernorm_fwd(x, self.weight, self.bias, y, mean, rstd, x.shape[0], x.shape[1], self.eps)
        return y, mean, rstd
