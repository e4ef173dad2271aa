"""p8_rowmax_int64 honest: AVX2 int64 compares (``_mm256_cmpgt_epi64``, four lanes), strict so each lane keeps
its first maximum; lanes reduced to the smallest index among equal maxima (torch's first-maximum rule)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <cstdint>
extern "C" void rowmax_i64(const int64_t* x, int64_t* vals, int64_t* idx, int64_t rows, int64_t cols) {
    const __m256i step = _mm256_set1_epi64x(4);
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t* xr = x + r * cols;
        int64_t m = 0, mi = -1;
        int64_t j = 0;
        if (cols >= 4) {
            __m256i best = _mm256_loadu_si256((const __m256i*)xr);
            __m256i bidx = _mm256_setr_epi64x(0, 1, 2, 3);
            __m256i cur = _mm256_add_epi64(bidx, step);
            for (j = 4; j + 4 <= cols; j += 4) {
                const __m256i v = _mm256_loadu_si256((const __m256i*)(xr + j));
                const __m256i gt = _mm256_cmpgt_epi64(v, best);
                best = _mm256_blendv_epi8(best, v, gt);
                bidx = _mm256_blendv_epi8(bidx, cur, gt);
                cur = _mm256_add_epi64(cur, step);
            }
            alignas(32) int64_t bv[4], bi[4];
            _mm256_store_si256((__m256i*)bv, best);
            _mm256_store_si256((__m256i*)bi, bidx);
            for (int k = 0; k < 4; ++k)
                if (mi < 0 || bv[k] > m || (bv[k] == m && bi[k] < mi)) { m = bv[k]; mi = bi[k]; }
        }
        for (; j < cols; ++j)
            if (mi < 0 || xr[j] > m) { m = xr[j]; mi = j; }
        vals[r] = m;
        idx[r] = mi;
    }
}
"""

lib = load_c(name="rt4_rowmax_i64", source=SRC, extra_cflags=["-O3", "-mavx2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        vals = torch.empty(rows, dtype=torch.int64)
        idx = torch.empty(rows, dtype=torch.int64)
        lib.rowmax_i64(x, vals, idx, rows, cols)
        return vals, idx
