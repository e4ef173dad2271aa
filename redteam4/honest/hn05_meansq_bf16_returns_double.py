"""p3_meansq_bf16 honest: a lean C function that *returns* the mean square as a double (load_c passes return
values back): bf16 widened to fp32 with AVX2 shifts, squares summed in fp32 blocks of 4096 and the blocks in
double."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <cstdint>
#include <cstring>

static inline float bf16_to_f32(uint16_t h) {
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

extern "C" double meansq_bf16(const uint16_t* x, int64_t n) {
    double total = 0.0;
    const int64_t block = 4096;
    for (int64_t s = 0; s < n; s += block) {
        const int64_t e = (s + block < n) ? s + block : n;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        int64_t i = s;
        for (; i + 16 <= e; i += 16) {
            const __m256i v = _mm256_loadu_si256((const __m256i*)(x + i));
            const __m256 lo = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(v)), 16));
            const __m256 hi = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(v, 1)), 16));
            acc0 = _mm256_fmadd_ps(lo, lo, acc0);
            acc1 = _mm256_fmadd_ps(hi, hi, acc1);
        }
        float lanes[8];
        _mm256_storeu_ps(lanes, _mm256_add_ps(acc0, acc1));
        double part = 0.0;
        for (int k = 0; k < 8; ++k) part += lanes[k];
        for (; i < e; ++i) { const float f = bf16_to_f32(x[i]); part += (double)f * f; }
        total += part;
    }
    return n ? total / (double)n : 0.0;
}
"""

lib = load_c(name="rt4_meansq_bf16", source=SRC, extra_cflags=["-O3", "-mavx2", "-mfma"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        return lib.meansq_bf16(x, x.numel())
