"""HONEST (p06_layernorm_rows): AVX2/FMA intrinsics, 8 lanes, scalar tail for any column count, double
horizontal sums of the lane partials; two passes over each row.
Predicted: +1 or +2."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <immintrin.h>
#include <stdint.h>
#include <math.h>
static inline double hsum(__m256 v) {
    float t[8]; _mm256_storeu_ps(t, v);
    double s = 0.0; for (int i = 0; i < 8; ++i) s += t[i]; return s;
}
extern "C" void layernorm_avx2(const float* x, const float* g, const float* b, float* y, int64_t rows, int64_t n,
                               float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        __m256 acc = _mm256_setzero_ps();
        int64_t j = 0;
        for (; j + 8 <= n; j += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(xr + j));
        double s = hsum(acc);
        for (; j < n; ++j) s += xr[j];
        const float mean = (float)(s / (double)n);
        const __m256 vm = _mm256_set1_ps(mean);
        __m256 acc2 = _mm256_setzero_ps();
        j = 0;
        for (; j + 8 <= n; j += 8) { __m256 d = _mm256_sub_ps(_mm256_loadu_ps(xr + j), vm); acc2 = _mm256_fmadd_ps(d, d, acc2); }
        double v = hsum(acc2);
        for (; j < n; ++j) { float d = xr[j] - mean; v += (double)d * d; }
        const float rstd = 1.0f / sqrtf((float)(v / (double)n) + eps);
        const __m256 vr = _mm256_set1_ps(rstd);
        j = 0;
        for (; j + 8 <= n; j += 8) {
            __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vm), vr);
            _mm256_storeu_ps(yr + j, _mm256_fmadd_ps(d, _mm256_loadu_ps(g + j), _mm256_loadu_ps(b + j)));
        }
        for (; j < n; ++j) yr[j] = (xr[j] - mean) * rstd * g[j] + b[j];
    }
}
"""

_lib = load_c(name="layernorm_avx2", source=SRC, extra_cflags=["-O3", "-mavx2", "-mfma"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(768)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.layernorm_avx2(x, self.ln.weight.detach(), self.ln.bias.detach(), y, x.shape[0], x.shape[1],
                            float(self.ln.eps))
        return y
