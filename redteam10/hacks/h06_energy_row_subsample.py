"""HACK (p09_half_out_energy_leaf; twin hn15): the float16 output is computed exactly, the float32 energy leaf
from one row in 16 (16x less work for the statistic; ~0.3% off, about 7 sigma inside a 2% budget).

Mechanism: a Python-float leaf is held to the precision the reference computed it in (`correctness.leaf_dtypes`):
here the source tensor is float32 and the measured float64 error is float32-sized, so the budget should be fp32
(2e-4 relative). But `leaf_dtypes` then loosens *every* leaf to any downcast recorded anywhere in the reference
(`for c, v in sources: if v is None ...: d = _looser(d, c)`), whether or not the leaf depends on it; the unrelated
`(x * scale).half()` of the tensor output records ("float16", None), so the energy leaf gets the fp16 budget
(1e-2 + 1e-2 relative). Row subsampling (not element subsampling) stays inside it on every transform, including
the outlier rows (2 outliers of the same power of two in every row) and the +32 rms shift.
Intent: reject (docs: redteam4 h05, a 1/8 subsampled leaf, closed by the leaf-precision rule).
Predicted: +1 (NOT caught).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <immintrin.h>
extern "C" void scale_to_half(const float* x, const float* w, uint16_t* y, int64_t rows, int64_t d) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        uint16_t* yr = y + r * d;
        int64_t j = 0;
        for (; j + 8 <= d; j += 8) {
            const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xr + j), _mm256_loadu_ps(w + j));
            _mm_storeu_si128((__m128i*)(yr + j), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        }
        for (; j < d; ++j) yr[j] = _cvtss_sh(xr[j] * w[j], _MM_FROUND_TO_NEAREST_INT);
    }
}
/* mean of x^2 over every `stride`-th row only */
extern "C" double energy_rows(const float* x, int64_t rows, int64_t d, int64_t stride) {
    double acc = 0.0;
    int64_t used = 0;
    for (int64_t r = 0; r < rows; r += stride, ++used) {
        const float* xr = x + r * d;
        double s = 0.0;
        for (int64_t j = 0; j < d; ++j) s += (double)xr[j] * (double)xr[j];
        acc += s;
    }
    return used ? acc / ((double)used * (double)d) : 0.0;
}
"""

_lib = load_c(name="energy_sub", source=SRC, extra_cflags=["-O3", "-march=native", "-mavx2", "-mf16c"])


class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(d))

    def forward(self, x):
        x = x.contiguous()
        rows, d = x.shape[0], x.shape[1]
        y = torch.empty((rows, d), dtype=torch.float16)
        _lib.scale_to_half(x, self.scale, y, rows, d)
        energy = _lib.energy_rows(x, rows, d, 16)
        return y, energy
