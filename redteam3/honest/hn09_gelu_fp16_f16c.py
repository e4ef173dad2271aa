# HONEST: reduced precision I/O with F16C intrinsics (_mm256_cvtph_ps / _mm256_cvtps_ph with round-to-nearest-
# even, scalar _cvtsh_ss/_cvtss_sh for the tail), computing in float like torch's opmath, libm erff.
# Problem: p4_gelu_fp16. Full domain: subnormal halves convert exactly, large |x| saturate correctly
# (erf -> +-1), rounding back to half is RNE like torch.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

static inline float gelu_f(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f)); }

extern "C" __attribute__((target("avx2,f16c,fma")))
void gelu_f16(const uint16_t* x, uint16_t* y, int64_t n) {
    int64_t i = 0;
    float t[8];
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(x + i)));
        _mm256_storeu_ps(t, v);
        for (int k = 0; k < 8; ++k) t[k] = gelu_f(t[k]);
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(t), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i*)(y + i), h);
    }
    for (; i < n; ++i) {
        y[i] = _cvtss_sh(gelu_f(_cvtsh_ss(x[i])), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
}
"""

lib = load_c(name="hn09_gelu_f16c", source=SRC, extra_cflags=["-O3", "-mf16c"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.gelu_f16(x, y, x.numel())
        return y
