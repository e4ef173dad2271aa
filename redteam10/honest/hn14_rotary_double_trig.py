"""HONEST (p08_rotary_omega_scalar): fused, no table: for each (t, k) the fp32 angle is formed as torch forms it,
its cos/sin evaluated in double (correctly rounded to float, at least as accurate as torch's Sleef), and applied
to every batch row at once; `#pragma omp simd` on the batch loop (-fopenmp-simd, no runtime); the output is
written through a flat (B*T, D) view and returned reshaped (`.view`, no copy).
Predicted: +1.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
#include <cmath>
extern "C" void rope_fused(const float* x, float* y, std::int64_t b, std::int64_t t_len, std::int64_t h,
                           double omega) {
    const float om = (float)omega;
    const std::int64_t d = 2 * h, plane = t_len * d;
    for (std::int64_t t = 0; t < t_len; ++t)
        for (std::int64_t k = 0; k < h; ++k) {
            const float a = (float)(t * (k + 1)) * om;
            const float c = (float)std::cos((double)a);
            const float s = (float)std::sin((double)a);
            const std::int64_t o = t * d + k;
#pragma omp simd
            for (std::int64_t bi = 0; bi < b; ++bi) {
                const float x1 = x[bi * plane + o], x2 = x[bi * plane + o + h];
                y[bi * plane + o] = x1 * c - x2 * s;
                y[bi * plane + o + h] = x1 * s + x2 * c;
            }
        }
}
"""

_lib = load_c(name="rope_fused", source=SRC, extra_cflags=["-O3", "-march=native", "-fopenmp-simd"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, omega):
        x = x.contiguous()
        b, t_len, d = x.shape
        flat = torch.empty(b * t_len, d)
        _lib.rope_fused(x, flat, b, t_len, d // 2, float(omega))
        return flat.view(b, t_len, d)
