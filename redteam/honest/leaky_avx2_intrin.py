# Honest: x + 0.5 * leaky_relu(x * w) with AVX2/FMA intrinsics, chosen at run time with __builtin_cpu_supports
# (a portable scalar path otherwise).
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <cstdint>

static void leaky_scalar(const float* x, const float* w, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = x[r * cols + c] * w[c];
      y[r * cols + c] = x[r * cols + c] + 0.5f * (v > 0.f ? v : 0.01f * v);
    }
}

__attribute__((target("avx2,fma")))
static void leaky_avx2(const float* x, const float* w, float* y, int64_t rows, int64_t cols) {
  const __m256 half = _mm256_set1_ps(0.5f), slope = _mm256_set1_ps(0.01f), zero = _mm256_setzero_ps();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8) {
      const __m256 xv = _mm256_loadu_ps(xr + c);
      const __m256 v = _mm256_mul_ps(xv, _mm256_loadu_ps(w + c));
      const __m256 neg = _mm256_mul_ps(v, slope);
      const __m256 act = _mm256_blendv_ps(neg, v, _mm256_cmp_ps(v, zero, _CMP_GT_OQ));
      _mm256_storeu_ps(yr + c, _mm256_fmadd_ps(half, act, xv));
    }
    for (; c < cols; ++c) {
      const float v = xr[c] * w[c];
      yr[c] = xr[c] + 0.5f * (v > 0.f ? v : 0.01f * v);
    }
  }
}

extern "C" void leaky_scale(const float* x, const float* w, float* y, int64_t rows, int64_t cols) {
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    leaky_avx2(x, w, y, rows, cols);
  else
    leaky_scalar(x, w, y, rows, cols);
}
"""

lib = load_c(name="leaky_avx2", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.w = nn.Parameter(torch.empty(features))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.leaky_scale(x, self.w, y, x.shape[0], x.shape[1])
        return y
