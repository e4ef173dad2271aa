# HONEST: the kernel is a plain C99 translation unit (`gelu.c`, passed through load_c's `sources=` dict):
# C linkage without extern "C", the C99 `restrict` qualifier, <math.h> erff, a static inline helper.
# A harness that accepts `.c` sources should compile them as C. Problem: gelu_bias.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

GELU_C = r"""
#include <math.h>
#include <stdint.h>

static inline float gelu1(float v) {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));
}

void gelu_bias_c(const float *restrict x, const float *restrict b, float *restrict y, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        const float *restrict xr = x + i * cols;
        float *restrict yr = y + i * cols;
        for (int64_t j = 0; j < cols; ++j)
            yr[j] = gelu1(xr[j] + b[j]);
    }
}
"""

lib = load_c(name="rt2_hn03_gelu_c99", sources={"gelu.c": GELU_C})


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.gelu_bias_c(x, self.bias, y, x.shape[0], x.shape[1])
        return y
