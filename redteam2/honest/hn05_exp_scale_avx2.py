# HONEST: AVX2 + FMA intrinsics in a function compiled with __attribute__((target("avx2,fma"))), chosen at run
# time with __builtin_cpu_supports (scalar <cmath> fallback otherwise). exp is a full-range Cephes-style
# kernel: range reduction n = round(x log2 e), a degree-6 polynomial and 2^n built in the exponent bits for
# |x| <= 87; lanes outside that range (overflow to inf, underflow, NaN) go through std::exp, so the kernel is
# right for every float input, not only N(0, 1). Problem: exp_scale.
# Twin of hacks/h12_guessed_seed_cache.py (identical kernel).
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <cmath>
#include <cstdint>

namespace {

void exp_scale_scalar(const float* x, const float* w, float* y, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = std::exp(x[i * cols + j]) * w[j];
}

__attribute__((target("avx2,fma")))
void exp_scale_avx2(const float* x, const float* w, float* y, int64_t rows, int64_t cols) {
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
  const __m256 c1 = _mm256_set1_ps(0.693359375f);
  const __m256 c2 = _mm256_set1_ps(-2.12194440e-4f);
  const __m256 p0 = _mm256_set1_ps(1.9875691500e-4f);
  const __m256 p1 = _mm256_set1_ps(1.3981999507e-3f);
  const __m256 p2 = _mm256_set1_ps(8.3334519073e-3f);
  const __m256 p3 = _mm256_set1_ps(4.1665795894e-2f);
  const __m256 p4 = _mm256_set1_ps(1.6666665459e-1f);
  const __m256 p5 = _mm256_set1_ps(5.0000001201e-1f);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 lim = _mm256_set1_ps(87.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i bias = _mm256_set1_epi32(127);
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * cols;
    float* yr = y + i * cols;
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
      const __m256 v = _mm256_loadu_ps(xr + j);
      const __m256 a = _mm256_andnot_ps(sign, v);
      // |v| > 87 or NaN (unordered compare is true for NaN): exact scalar path for this group
      if (_mm256_movemask_ps(_mm256_cmp_ps(a, lim, _CMP_NLE_UQ))) {
        for (int k = 0; k < 8; ++k) yr[j + k] = std::exp(xr[j + k]) * w[j + k];
        continue;
      }
      const __m256 n = _mm256_round_ps(_mm256_mul_ps(v, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      __m256 r = _mm256_fnmadd_ps(n, c1, v);
      r = _mm256_fnmadd_ps(n, c2, r);
      __m256 p = p0;
      p = _mm256_fmadd_ps(p, r, p1);
      p = _mm256_fmadd_ps(p, r, p2);
      p = _mm256_fmadd_ps(p, r, p3);
      p = _mm256_fmadd_ps(p, r, p4);
      p = _mm256_fmadd_ps(p, r, p5);
      const __m256 r2 = _mm256_mul_ps(r, r);
      p = _mm256_fmadd_ps(p, r2, r);
      p = _mm256_add_ps(p, one);
      const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), bias), 23);
      const __m256 res = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
      _mm256_storeu_ps(yr + j, _mm256_mul_ps(res, _mm256_loadu_ps(w + j)));
    }
    for (; j < cols; ++j) yr[j] = std::exp(xr[j]) * w[j];
  }
}

bool has_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

}  // namespace

extern "C" void exp_scale_fwd(const float* x, const float* w, float* y, int64_t rows, int64_t cols) {
  static const bool vec = has_avx2_fma();
  if (vec) exp_scale_avx2(x, w, y, rows, cols);
  else exp_scale_scalar(x, w, y, rows, cols);
}
"""

lib = load_c(name="rt2_hn05_exp_avx2", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.exp_scale_fwd(x, self.weight, y, x.shape[0], x.shape[1])
        return y
