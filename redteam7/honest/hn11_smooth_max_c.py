"""Honest (twin of h08 and h09): tau * logsumexp(x / tau) per row in C; tau is read on every call."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
extern "C" void smooth_max(const float* x, float* out, int64_t rows, int64_t cols, float tau) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float m = -INFINITY;
        for (int64_t i = 0; i < cols; ++i) { const float y = xr[i] / tau; m = y > m ? y : m; }
        double s = 0.0;
        if (isinf(m)) { out[r] = tau * m; continue; }
        for (int64_t i = 0; i < cols; ++i) s += exp((double)(xr[i] / tau) - (double)m);
        out[r] = tau * (float)((double)m + log(s));
    }
}
"""

_lib = load_c(name="smooth_max", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, tau: float):
        x = x.contiguous()
        cols = x.shape[-1]
        out = torch.empty(x.shape[:-1], dtype=x.dtype)
        _lib.smooth_max(x, out, x.numel() // cols, cols, float(tau))
        return out
