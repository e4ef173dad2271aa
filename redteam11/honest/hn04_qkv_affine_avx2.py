"""HONEST (p02_qkv_affine_inplace_view): AVX2 intrinsics (mul then add, no FMA, as the reference rounds), whole
buffer in place, the Q part returned as `qkv[:, :d]` (basic slicing, the same view as narrow).
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <cstdint>
extern "C" void affine_avx2(float* qkv, const float* w, const float* b, std::int64_t t, std::int64_t c) {
    for (std::int64_t r = 0; r < t; ++r) {
        float* row = qkv + r * c;
        std::int64_t j = 0;
        for (; j + 8 <= c; j += 8) {
            __m256 v = _mm256_loadu_ps(row + j);
            v = _mm256_add_ps(_mm256_mul_ps(v, _mm256_loadu_ps(w + j)), _mm256_loadu_ps(b + j));
            _mm256_storeu_ps(row + j, v);
        }
        for (; j < c; ++j) row[j] = row[j] * w[j] + b[j];
    }
}
"""

_lib = load_c(name="affine_avx2", source=SRC, extra_cflags=["-O2", "-mavx2", "-ffp-contract=off"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(768))
        self.b = nn.Parameter(torch.zeros(768))

    def forward(self, qkv):
        t, c = qkv.shape
        _lib.affine_avx2(qkv, self.w.detach(), self.b.detach(), t, c)
        return qkv[:, : c // 3]
