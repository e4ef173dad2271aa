"""Honest (twin of h05): row-wise L2 normalisation, every column of every row, any width."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
extern "C" void row_normalize(const float* x, float* out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        double s = 0.0;
        for (int64_t i = 0; i < cols; ++i) s += (double)xr[i] * xr[i];
        float n = (float)sqrt(s);
        if (n < 1e-12f) n = 1e-12f;
        float* o = out + r * cols;
        for (int64_t i = 0; i < cols; ++i) o[i] = xr[i] / n;
    }
}
"""

_lib = load_c(name="row_normalize", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        _lib.row_normalize(x, out, x.numel() // cols, cols)
        return out
