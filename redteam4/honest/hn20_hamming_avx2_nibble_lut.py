"""p9_hamming_u8 honest: AVX2 popcount with the nibble lookup table (vpshufb) and vpsadbw byte sums, 32 bytes
at a time, scalar __builtin_popcount tail."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <cstdint>
extern "C" void hamming_avx2(const uint8_t* a, const uint8_t* b, int64_t* out, int64_t rows, int64_t nbytes) {
    const __m256i lut = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4,
                                         0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
    const __m256i low = _mm256_set1_epi8(0x0f);
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* pa = a + r * nbytes;
        const uint8_t* pb = b + r * nbytes;
        __m256i acc = _mm256_setzero_si256();
        int64_t j = 0;
        for (; j + 32 <= nbytes; j += 32) {
            const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(pa + j)),
                                               _mm256_loadu_si256((const __m256i*)(pb + j)));
            const __m256i cnt = _mm256_add_epi8(_mm256_shuffle_epi8(lut, _mm256_and_si256(v, low)),
                                                _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), low)));
            acc = _mm256_add_epi64(acc, _mm256_sad_epu8(cnt, _mm256_setzero_si256()));
        }
        alignas(32) int64_t lanes[4];
        _mm256_store_si256((__m256i*)lanes, acc);
        int64_t total = lanes[0] + lanes[1] + lanes[2] + lanes[3];
        for (; j < nbytes; ++j) total += __builtin_popcount((unsigned)(pa[j] ^ pb[j]));
        out[r] = total;
    }
}
"""

lib = load_c(name="rt4_hamming_avx2", source=SRC, extra_cflags=["-O3", "-mavx2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty(a.shape[0], dtype=torch.int64)
        lib.hamming_avx2(a, b, out, a.shape[0], a.shape[1])
        return out
