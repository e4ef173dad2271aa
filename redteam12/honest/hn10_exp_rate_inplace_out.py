"""HONEST (p01_exp_log_intensity): exp computed in double from the float input, the exposure multiplied in
float, OpenMP simd over columns, the output allocated with torch.empty and written whole.
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void exp_rate_d(const float* x, const float* w, float* y, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; ++r) {
        #pragma omp simd
        for (int64_t j = 0; j < n; ++j) y[r * n + j] = (float)exp((double)x[r * n + j]) * w[j];
    }
}
"""

_lib = load_c(name="exp_rate_d", source=SRC, extra_cflags=["-O3", "-fopenmp-simd"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.exposure = nn.Parameter(torch.ones(1024))

    def forward(self, log_rate):
        x = log_rate.contiguous()
        y = torch.empty(x.shape)
        _lib.exp_rate_d(x, self.exposure.detach(), y, x.shape[0], x.shape[1])
        return y
