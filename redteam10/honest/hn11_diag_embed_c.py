"""HONEST (p07_diag_embed; twin of h07): every call allocates its output and writes all of it (memset of each
matrix, then its diagonal).
Predicted: +1.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <string.h>
extern "C" void diag_embed(const float* x, float* y, int64_t b, int64_t n) {
    for (int64_t k = 0; k < b; ++k) {
        float* yk = y + k * n * n;
        memset(yk, 0, (size_t)(n * n) * sizeof(float));
        for (int64_t i = 0; i < n; ++i) yk[i * n + i] = x[k * n + i];
    }
}
"""

_lib = load_c(name="diag_embed", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        b, n = x.shape
        y = torch.empty(b, n, n)
        _lib.diag_embed(x, y, b, n)
        return y
