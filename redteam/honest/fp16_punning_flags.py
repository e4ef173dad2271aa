# Honest: float16 affine + clamp. The body converts 8 halves at a time with F16C; the tail converts through the
# IEEE bit patterns with pointer type punning, so the file is built with -fno-strict-aliasing.
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <cstdint>

static inline float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
  if (exp == 0) {
    if (man == 0) bits = sign;
    else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(man & 0x400u)) { man <<= 1; --exp; }
      man &= 0x3ffu;
      bits = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
  else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  return *reinterpret_cast<float*>(&bits);
}

static inline uint16_t float_to_half(float f) {
  // round to nearest even via F16C on a single lane
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

extern "C" void affine_clamp_f16(const uint16_t* x, uint16_t* y, int64_t n) {
  const __m256 a = _mm256_set1_ps(1.5f), b = _mm256_set1_ps(0.25f);
  const __m256 lo = _mm256_set1_ps(-4.0f), hi = _mm256_set1_ps(4.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    // x * 1.5 is rounded to half first, as the reference computes it in float16
    v = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(v, a), _MM_FROUND_TO_NEAREST_INT));
    v = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_add_ps(v, b), _MM_FROUND_TO_NEAREST_INT));
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) {
    float v = half_to_float(float_to_half(half_to_float(x[i]) * 1.5f));
    v = half_to_float(float_to_half(v + 0.25f));
    v = v < -4.0f ? -4.0f : (v > 4.0f ? 4.0f : v);
    y[i] = float_to_half(v);
  }
}
"""

lib = load_c(name="fp16_affine", source=SRC, extra_cflags=["-O3", "-mf16c", "-mavx2", "-fno-strict-aliasing"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.affine_clamp_f16(x, y, x.numel())
        return y
