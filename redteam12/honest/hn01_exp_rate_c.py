"""HONEST (p01_exp_log_intensity; twin of h01): expf over every element times the loaded exposure, no clamp.
Predicted: +1 (maybe +2: one pass, vectorised by gcc with -O3 -march=native through libmvec's expf)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void exp_rate(const float* x, const float* w, float* y, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        for (int64_t j = 0; j < n; ++j) yr[j] = expf(xr[j]) * w[j];
    }
}
"""

_lib = load_c(name="exp_rate", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.exposure = nn.Parameter(torch.ones(1024))

    def forward(self, log_rate):
        x = log_rate.contiguous()
        y = torch.empty_like(x)
        _lib.exp_rate(x, self.exposure.detach(), y, x.shape[0], x.shape[1])
        return y
