"""HONEST (p08_rotary_omega_scalar; twin of h10): every call builds the (T, D/2) cos/sin table for this call's
omega (the fp32 angle formed exactly as torch forms it: float(t*(k+1)) * float(omega), then glibc sincosf) and
applies it to every batch row; omega arrives as a Python float (a C double).
Predicted: +1 (slower than eager's vectorised Sleef cos/sin; the table is most of the work).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void rope_table(float* c, float* s, int64_t t_len, int64_t h, double omega) {
    const float om = (float)omega;
    for (int64_t t = 0; t < t_len; ++t)
        for (int64_t k = 0; k < h; ++k) {
            const float a = (float)(t * (k + 1)) * om;
            sincosf(a, &s[t * h + k], &c[t * h + k]);
        }
}
extern "C" void rope_apply(const float* x, const float* c, const float* s, float* y,
                           int64_t b, int64_t t_len, int64_t h) {
    const int64_t d = 2 * h;
    for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t t = 0; t < t_len; ++t) {
            const float* xr = x + (bi * t_len + t) * d;
            float* yr = y + (bi * t_len + t) * d;
            const float* cr = c + t * h;
            const float* sr = s + t * h;
            for (int64_t k = 0; k < h; ++k) {
                const float x1 = xr[k], x2 = xr[h + k];
                yr[k] = x1 * cr[k] - x2 * sr[k];
                yr[h + k] = x1 * sr[k] + x2 * cr[k];
            }
        }
}
"""

_lib = load_c(name="rope_table", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, omega):
        x = x.contiguous()
        b, t_len, d = x.shape
        half = d // 2
        c = torch.empty(t_len, half)
        s = torch.empty(t_len, half)
        y = torch.empty_like(x)
        _lib.rope_table(c, s, t_len, half, float(omega))
        _lib.rope_apply(x, c, s, y, b, t_len, half)
        return y
