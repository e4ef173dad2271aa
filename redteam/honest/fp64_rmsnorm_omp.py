# Honest: float64 RMSNorm in one kernel (sum of squares with an OpenMP SIMD reduction, then the scaled store).
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>

extern "C" void rmsnorm_f64(const double* x, const double* w, double* y, int64_t rows, int64_t cols, double eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * cols;
    double* yr = y + r * cols;
    double ss = 0.0;
#pragma omp simd reduction(+ : ss)
    for (int64_t c = 0; c < cols; ++c) ss += xr[c] * xr[c];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv * w[c];
  }
}
"""

_lib = load_c(name="rmsnorm_f64", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(features, dtype=torch.float64))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.rmsnorm_f64(x, self.weight, y, x.shape[0], x.shape[1], self.eps)
        return y
