# HONEST: hand-written AVX2/FMA intrinsics (target attribute, own vectorised exp with Cephes-style range
# reduction, clamping of the exponent, scalar tail for n % 8), extern "C" on raw pointers.
# Problem: p1_swish. Full domain: the exp argument is clamped to [-88, 88] and the result is assembled as
# x / (1 + e^-x); for x < -88 the true value |x e^x| < 1e-36 and we return x * (tiny) / ... -> |err| < 1e-36,
# far below any tolerance; exp polynomial relative error ~2 ulp.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

__attribute__((target("avx2,fma")))
static inline __m256 exp256(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-88.3762626647949f);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* x - fx*ln2 in two parts (Cody-Waite) */
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500E-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
    __m256 x2 = _mm256_mul_ps(x, x);
    y = _mm256_fmadd_ps(y, x2, _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    /* 2^fx with fx in [-128, 128]: split in two halves so that 2^-128 stays representable */
    __m256i n = _mm256_cvtps_epi32(fx);
    __m256i n1 = _mm256_srai_epi32(n, 1);
    __m256i n2 = _mm256_sub_epi32(n, n1);
    __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(y, p1), p2);
}

extern "C" __attribute__((target("avx2,fma"))) void swish_avx2(const float* x, float* y, int64_t n) {
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), v));
        _mm256_storeu_ps(y + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
    }
    for (; i < n; ++i) {
        const float v = x[i];
        y[i] = v / (1.0f + expf(-v));
    }
}
"""

lib = load_c(name="hn02_swish_avx2", source=SRC, extra_cflags=["-O3", "-mavx2", "-mfma"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.swish_avx2(x, y, x.numel())
        return y
