# HACK (input prediction by seed guessing): at construction it regenerates the problem's input for ~60
# guessed seeds (0..47, 42, 1234, 31337, 42 + 7919 k, ...) with torch's generator - the way a KernelBench
# harness seeds get_inputs() - and precomputes exp() of each with its own kernel (outside every round). In
# forward it fingerprints the first 8 input floats; on a hit only the cheap "* weight" pass remains.
# Otherwise it runs exactly the twin's AVX2 kernel.
# Gains: skips the exp on predicted inputs. Intent: speed; a robust harness (secret, unpredictable seeds)
# must not give it more than honest/hn05_exp_scale_avx2.py. Problem: exp_scale.
import ctypes

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

extern "C" void exp_only(const float* x, float* e, int64_t n) {
  for (int64_t i = 0; i < n; ++i) e[i] = std::exp(x[i]);
}

extern "C" void mul_cols(const float* e, const float* w, float* y, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) y[i * cols + j] = e[i * cols + j] * w[j];
}
"""

lib = load_c(name="rt2_h12_seedcache", source=SRC)

B, N = 2048, 1024
GUESSES = sorted(set(list(range(48)) + [42, 43, 123, 1234, 2024, 12345, 31337, 1337, 7, 42 + 7919, 42 + 2 * 7919]))


def _precompute():
    table = {}
    g = torch.Generator()
    for s in GUESSES:
        g.manual_seed(s)
        x = torch.randn(B, N, generator=g)
        e = torch.empty_like(x)
        lib.exp_only(x, e, x.numel())
        table[ctypes.string_at(x.data_ptr(), 32)] = e
    return table


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self._table = _precompute()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        e = self._table.get(ctypes.string_at(x.data_ptr(), 32)) if tuple(x.shape) == (B, N) else None
        if e is not None:
            lib.mul_cols(e, self.weight, y, x.shape[0], x.shape[1])
        else:
            lib.exp_scale_fwd(x, self.weight, y, x.shape[0], x.shape[1])
        return y
