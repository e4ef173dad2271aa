"""p2: uint8 mix with AVX2 intrinsics (16-bit multiply on unpacked lanes), C++23 (std::unreachable) build.

Honest-kernel probe: -std=c++23 is a dialect GCC 12 supports; the flag allowlist names c++11/14/17/20 only."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <cstdint>
#include <utility>

static inline std::uint8_t mix1(std::uint8_t v) {
    return (std::uint8_t)((std::uint8_t)(v * 37u + 11u) ^ (std::uint8_t)(v >> 3));
}

extern "C" void u8_mix(const std::uint8_t* x, std::uint8_t* out, std::int64_t n) {
    if (n < 0) std::unreachable();
    std::int64_t i = 0;
    const __m256i k37 = _mm256_set1_epi16(37);
    const __m256i k11 = _mm256_set1_epi8(11);
    const __m256i lo8 = _mm256_set1_epi16(0x00FF);
    const __m256i m1f = _mm256_set1_epi8(0x1F);
    for (; i + 32 <= n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i*)(x + i));
        __m256i even = _mm256_and_si256(v, lo8);                  // bytes 0,2,4.. as 16-bit
        __m256i odd = _mm256_srli_epi16(v, 8);                    // bytes 1,3,5.. as 16-bit
        __m256i pe = _mm256_and_si256(_mm256_mullo_epi16(even, k37), lo8);
        __m256i po = _mm256_slli_epi16(_mm256_mullo_epi16(odd, k37), 8);
        __m256i prod = _mm256_or_si256(pe, po);                   // (v * 37) mod 256 per byte
        __m256i a = _mm256_add_epi8(prod, k11);
        __m256i sh = _mm256_and_si256(_mm256_srli_epi16(v, 3), m1f); // per-byte logical >> 3
        _mm256_storeu_si256((__m256i*)(out + i), _mm256_xor_si256(a, sh));
    }
    for (; i < n; ++i) out[i] = mix1(x[i]);
}
"""
lib = load_c(name="hn03_u8", source=SRC, extra_cflags=["-O3", "-mavx2", "-std=c++23"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.u8_mix(x, out, x.numel())
        return out
