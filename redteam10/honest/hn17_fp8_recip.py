"""HONEST (p11_fp8_rowwise_quant): per-row amax, scale = amax / 448 (the reference's own division, bit-exact), the
row scaled by the reciprocal of its scale (one division per row instead of one per element: what torch's own
quantizers and most fp8 kernels do), then c10's fp32 -> float8_e4m3fn conversion ported bit for bit
(round-to-nearest-even, denormals, NaN above 480).

Why the harness might reject it: x * (1/s) and x / s differ in the last fp32 bit for some elements, and where
such an element lies within one fp32 ulp of an fp8 rounding midpoint (~1e-6 of them) the fp8 code differs by one
step. float8 dtypes have no entry in the tolerance presets (`tolerance_for` -> (0, 0)): a floating output compared
exactly, with only the dtype's `tiny` (2^-6) as slack, while float16 gets 1e-2. About 4 such elements per 4M-element
round are expected. (If torch's float8 CPU kernels lack `isfinite`, the plan's transform checks raise first: a
harness_error for every solution; -1 either way.)
Predicted: -1 output_mismatch (false positive).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <string.h>
#include <math.h>

/* c10::detail::fp8e4m3fn_from_fp32_value, ported */
static inline uint8_t fp8e4m3fn_from_fp32(float f) {
    const uint32_t fp8_max = UINT32_C(1087) << 20;
    const uint32_t denorm_mask = UINT32_C(141) << 23;
    uint32_t f_bits;
    memcpy(&f_bits, &f, 4);
    uint8_t result = 0u;
    const uint32_t sign = f_bits & UINT32_C(0x80000000);
    f_bits ^= sign;
    if (f_bits >= fp8_max) {
        result = 0x7f;
    } else if (f_bits < (UINT32_C(121) << 23)) {
        float t, dm;
        memcpy(&t, &f_bits, 4);
        memcpy(&dm, &denorm_mask, 4);
        t = t + dm;
        memcpy(&f_bits, &t, 4);
        result = (uint8_t)(f_bits - denorm_mask);
    } else {
        const uint8_t mant_odd = (f_bits >> 20) & 1;
        f_bits += ((uint32_t)(7 - 127) << 23) + 0x7FFFF;
        f_bits += mant_odd;
        result = (uint8_t)(f_bits >> 20);
    }
    result |= (uint8_t)(sign >> 24);
    return result;
}

extern "C" void fp8_rowquant(const float* x, float* scale, uint8_t* q, int64_t rows, int64_t d, float fmax) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        float amax = 0.f;
        for (int64_t j = 0; j < d; ++j) amax = fmaxf(amax, fabsf(xr[j]));
        const float s = amax / fmax;
        scale[r] = s;
        const float inv = 1.0f / s;
        for (int64_t j = 0; j < d; ++j) q[r * d + j] = fp8e4m3fn_from_fp32(xr[j] * inv);
    }
}
"""

_lib = load_c(name="fp8_rowquant_recip", source=SRC, extra_cflags=["-O3", "-march=native", "-ffp-contract=off"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, d = x.shape
        scale = torch.empty(rows, 1)
        q = torch.empty((rows, d), dtype=torch.float8_e4m3fn)
        _lib.fp8_rowquant(x, scale, q, rows, d, 448.0)
        return scale, q
