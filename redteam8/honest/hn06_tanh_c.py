"""Honest (twin of h06): tanhf over the tensor in its own C, every round."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
extern "C" void tanh_all(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = tanhf(x[i]);
}
"""

_lib = load_c(name="tanh_all", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.tanh_all(x, out, x.numel())
        return out
