"""HONEST (p12_centered_mean_leaf): two-pass row standardisation (unbiased std, as torch.std) and the statistic
as the float64 mean of the kernel's own float32 output, returned by the C function as a double: as accurate as a
float32 output allows (its true value is 0).

Why the harness might reject it: a Python-float leaf is compared by relative error only (`compare`: `|a - e| <=
(atol + rtol) * |e|`, no absolute term). The reference's leaf is its own float32 rounding residue (~1e-10); its
float64 twin's is ~1e-17, so `measured_dtype` finds no budget that covers the reference's error and falls back to
bfloat16: 4e-2 * 1e-10 = 4e-12. Any other correct implementation (this one, float64, another summation order)
differs from the residue by ~1e-10. No solution can pass; the same leaf check also drops every transform.
Predicted: -1 output_mismatch on trial 0 (false positive).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" double standardize(const float* x, float* z, int64_t rows, int64_t d) {
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        float* zr = z + r * d;
        float s = 0.f;
        for (int64_t j = 0; j < d; ++j) s += xr[j];
        const float mean = s / (float)d;
        float ss = 0.f;
        for (int64_t j = 0; j < d; ++j) {
            const float c = xr[j] - mean;
            ss += c * c;
        }
        const float sd = sqrtf(ss / (float)(d - 1));
        for (int64_t j = 0; j < d; ++j) {
            zr[j] = (xr[j] - mean) / sd;
            total += (double)zr[j];
        }
    }
    return total / ((double)rows * (double)d);
}
"""

_lib = load_c(name="standardize_stat", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, d = x.shape
        z = torch.empty_like(x)
        m = _lib.standardize(x, z, rows, d)
        return z, m
