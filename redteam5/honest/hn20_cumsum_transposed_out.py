"""p10: cumsum vectorised ACROSS rows: 8 rows per AVX2 lane group, the running sums stored column-major into an
(N, B) buffer so every store is contiguous; the result is returned as the transposed view (a valid strided
torch tensor with the right shape and values; torch ops return non-contiguous tensors all the time).

Honest-kernel probe: the worker makes a non-contiguous output contiguous (torch's copy) inside the round."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <cstdint>
// out_t is (n, rows) row-major: out_t[j * rows + r] = sum_{i<=j} x[r * n + i]
extern "C" void cumsum_cols(const std::int32_t* x, std::int64_t* out_t, std::int64_t rows, std::int64_t n) {
    std::int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        __m256i acc = _mm256_setzero_si256();
        for (std::int64_t j = 0; j < n; ++j) {
            __m128i v = _mm_set_epi32(x[(r + 3) * n + j], x[(r + 2) * n + j], x[(r + 1) * n + j], x[r * n + j]);
            acc = _mm256_add_epi64(acc, _mm256_cvtepi32_epi64(v));
            _mm256_storeu_si256((__m256i*)(out_t + j * rows + r), acc);
        }
    }
    for (; r < rows; ++r) {
        std::int64_t acc = 0;
        for (std::int64_t j = 0; j < n; ++j) { acc += x[r * n + j]; out_t[j * rows + r] = acc; }
    }
}
"""
lib = load_c(name="hn20_cs", source=SRC, extra_cflags=["-O3", "-mavx2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, n = x.shape
        out_t = torch.empty(n, rows, dtype=torch.int64)
        lib.cumsum_cols(x, out_t, rows, n)
        return out_t.t()
