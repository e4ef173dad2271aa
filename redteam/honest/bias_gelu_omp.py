# Honest: fused bias + exact GELU in one pass (OpenMP rows, SIMD columns; -ffast-math lets GCC call the
# vector erf from glibc's libmvec).
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>

extern "C" void bias_gelu(const float* x, const float* bias, float* y, int64_t rows, int64_t cols) {
  const float kInvSqrt2 = 0.70710678118654752f;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      const float v = xr[c] + bias[c];
      yr[c] = 0.5f * v * (1.0f + erff(v * kInvSqrt2));
    }
  }
}
"""

_k = load_c(name="bias_gelu", source=SRC, extra_cflags=["-O3", "-ffast-math"])


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _k.bias_gelu(x, self.bias, out, x.size(0), x.size(1))
        return out
