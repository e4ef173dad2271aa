"""HONEST (p09_half_out_energy_leaf; twin of h06): the float16 output through F16C intrinsics (fp32 multiply, then
round-to-nearest-even conversion: bit-exact with torch's `.half()`), and the energy over every element, accumulated
in double and returned by the C function as a double (a Python-float leaf).
Predicted: +1.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <immintrin.h>
extern "C" double scale_half_energy(const float* x, const float* w, uint16_t* y, int64_t rows, int64_t d) {
    double acc = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        uint16_t* yr = y + r * d;
        double s = 0.0;
        int64_t j = 0;
        for (; j + 8 <= d; j += 8) {
            const __m256 xv = _mm256_loadu_ps(xr + j);
            const __m256 v = _mm256_mul_ps(xv, _mm256_loadu_ps(w + j));
            _mm_storeu_si128((__m128i*)(yr + j), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
            for (int k = 0; k < 8; ++k) s += (double)xr[j + k] * (double)xr[j + k];
        }
        for (; j < d; ++j) {
            yr[j] = _cvtss_sh(xr[j] * w[j], _MM_FROUND_TO_NEAREST_INT);
            s += (double)xr[j] * (double)xr[j];
        }
        acc += s;
    }
    return (rows && d) ? acc / ((double)rows * (double)d) : 0.0;
}
"""

_lib = load_c(name="scale_half_energy", source=SRC, extra_cflags=["-O3", "-mavx2", "-mf16c"])


class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(d))

    def forward(self, x):
        x = x.contiguous()
        rows, d = x.shape
        y = torch.empty((rows, d), dtype=torch.float16)
        energy = _lib.scale_half_energy(x, self.scale, y, rows, d)
        return y, energy
