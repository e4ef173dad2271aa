"""Honest (twin of h08): writes the zeros and the upper triangle of a fresh output every call."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <string.h>
extern "C" void triu(const float* x, float* y, int64_t b, int64_t n) {
    for (int64_t m = 0; m < b; ++m)
        for (int64_t i = 0; i < n; ++i) {
            const int64_t row = (m * n + i) * n;
            memset(y + row, 0, (size_t)i * sizeof(float));
            memcpy(y + row + i, x + row + i, (size_t)(n - i) * sizeof(float));
        }
}
"""

_lib = load_c(name="triu", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.shape[-1]
        _lib.triu(x, y, x.numel() // (n * n), n)
        return y
