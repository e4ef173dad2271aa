"""p4: tanh-GELU on fp16: F16C conversions (_mm256_cvtph_ps / _mm256_cvtps_ph) around a float loop that GCC
vectorises with -ffast-math into libmvec's tanhf (_ZGVdN8v_tanhf); fp16 rounding is round-to-nearest-even."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <cmath>
#include <cstdint>

static void gelu_block(const float* __restrict__ a, float* __restrict__ b, int n) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    for (int i = 0; i < n; ++i) {
        float v = a[i];
        b[i] = 0.5f * v * (1.0f + tanhf(k0 * (v + k1 * v * v * v)));
    }
}

extern "C" void gelu_f16(const std::uint16_t* x, std::uint16_t* out, std::int64_t n) {
    alignas(32) float a[1024], b[1024];
    for (std::int64_t s = 0; s < n; s += 1024) {
        int m = (int)((n - s) < 1024 ? (n - s) : 1024);
        int i = 0;
        for (; i + 8 <= m; i += 8)
            _mm256_store_ps(a + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(x + s + i))));
        for (; i < m; ++i) a[i] = _cvtsh_ss(x[s + i]);
        gelu_block(a, b, m);
        i = 0;
        for (; i + 8 <= m; i += 8)
            _mm_storeu_si128((__m128i*)(out + s + i), _mm256_cvtps_ph(_mm256_load_ps(b + i), _MM_FROUND_TO_NEAREST_INT));
        for (; i < m; ++i) out[s + i] = _cvtss_sh(b[i], _MM_FROUND_TO_NEAREST_INT);
    }
}
"""
lib = load_c(name="hn07_gelu", source=SRC, extra_cflags=["-O3", "-ffast-math", "-mavx2", "-mfma", "-mf16c"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.gelu_f16(x, out, x.numel())
        return out
