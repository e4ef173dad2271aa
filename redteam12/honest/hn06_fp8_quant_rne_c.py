"""HONEST (p05_fp8_rowwise_quant; twin of h05): per-row amax, scale = amax / 448 computed as the reference does
(float32 division), each element divided by the scale and encoded to e4m3fn bits with round-to-nearest-even
(normals by the carry trick on the float32 bits, subnormals by rintf of v * 2^9). The uint8 buffer is returned
as a float8_e4m3fn view.
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <string.h>
#include <math.h>
static inline uint8_t e4m3_rne(float v) {
    uint32_t bits; memcpy(&bits, &v, 4);
    const uint8_t sign = (uint8_t)((bits >> 24) & 0x80u);
    const float a = fabsf(v);
    if (a != a) return (uint8_t)(sign | 0x7Fu);
    if (a < 0.015625f) {                       /* below 2^-6: subnormal grid of 2^-9 */
        const float m = rintf(a * 512.0f);     /* nearest, ties to even (default rounding mode) */
        return (uint8_t)(sign | (uint8_t)m);   /* m == 8 is exactly 2^-6's encoding */
    }
    uint32_t b = bits & 0x7FFFFFFFu;
    b += 0x7FFFFu + ((b >> 20) & 1u);          /* round the mantissa to 3 bits, ties to even */
    int e = (int)(b >> 23) - 127 + 7;
    uint32_t m = (b >> 20) & 7u;
    if (e > 15 || (e == 15 && m == 7u)) return (uint8_t)(sign | 0x7Fu);  /* beyond 448: NaN, as torch's cast */
    return (uint8_t)(sign | (uint8_t)(e << 3) | (uint8_t)m);
}
extern "C" void fp8_quant_rne(const float* x, uint8_t* q, float* scale, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        float amax = 0.f;
        for (int64_t j = 0; j < n; ++j) { float a = fabsf(xr[j]); amax = a > amax ? a : amax; }
        if (amax < 1e-12f) amax = 1e-12f;
        const float s = amax / 448.0f;
        scale[r] = s;
        for (int64_t j = 0; j < n; ++j) q[r * n + j] = e4m3_rne(xr[j] / s);
    }
}
"""

_lib = load_c(name="fp8_quant_rne", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, n = x.shape
        q = torch.empty(rows, n, dtype=torch.uint8)
        scale = torch.empty(rows, 1)
        _lib.fp8_quant_rne(x, q, scale, rows, n)
        return q.view(torch.float8_e4m3fn), scale
