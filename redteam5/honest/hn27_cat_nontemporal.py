"""p1: concatenation with AVX non-temporal stores (_mm256_stream_ps, bypassing the cache for a 16 MB output that is
not re-read by the kernel) and an sfence before returning; unaligned heads handled with plain stores."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <cstdint>

static inline void copy_nt(float* dst, const float* src, std::int64_t n) {
    std::int64_t i = 0;
    while (i < n && (((std::uintptr_t)(dst + i)) & 31u)) { dst[i] = src[i]; ++i; }
    for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
    for (; i < n; ++i) dst[i] = src[i];
}

extern "C" void cat_rows_nt(const float* x, const float* y, float* out, std::int64_t rows, std::int64_t n1,
                            std::int64_t n2) {
    const std::int64_t w = n1 + n2;
    for (std::int64_t r = 0; r < rows; ++r) {
        copy_nt(out + r * w, x + r * n1, n1);
        copy_nt(out + r * w + n1, y + r * n2, n2);
    }
    _mm_sfence();
}
"""
lib = load_c(name="hn27_cat", source=SRC, extra_cflags=["-O2", "-mavx"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        x = x.contiguous()
        y = y.contiguous()
        out = torch.empty(x.shape[0], x.shape[1] + y.shape[1], dtype=x.dtype)
        lib.cat_rows_nt(x, y, out, x.shape[0], x.shape[1], y.shape[1])
        return out
