"""HACK (redteam12 h05 class): a truncating float8 encoder (round toward zero, no carry), one e4m3 step low on
about half the elements, each within the one-step budget of a float8 output; more than 1% of a float8 output
rounded otherwise than the reference is a biased quantiser (``correctness.rounded_otherwise``)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <string.h>
#include <math.h>
static inline uint8_t e4m3_trunc(float v) {
    uint32_t bits; memcpy(&bits, &v, 4);
    const uint8_t sign = (uint8_t)((bits >> 24) & 0x80u);
    const float a = fabsf(v);
    if (a < 0.015625f) return (uint8_t)(sign | (uint8_t)(a * 512.0f));   /* truncation toward zero */
    const uint32_t b = bits & 0x7FFFFFFFu;
    int e = (int)(b >> 23) - 127 + 7;
    uint32_t m = (b >> 20) & 7u;                                           /* low 20 bits dropped */
    if (e > 15) { e = 15; m = 6u; }
    if (e == 15 && m == 7u) m = 6u;                                        /* clamp at 448 */
    return (uint8_t)(sign | (uint8_t)(e << 3) | (uint8_t)m);
}
extern "C" void fp8_quant_trunc(const float* x, uint8_t* q, float* scale, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        float amax = 0.f;
        for (int64_t j = 0; j < n; ++j) { float a = fabsf(xr[j]); amax = a > amax ? a : amax; }
        if (amax < 1e-12f) amax = 1e-12f;
        const float s = amax / 448.0f;
        const float inv = 448.0f / amax;
        scale[r] = s;
        for (int64_t j = 0; j < n; ++j) q[r * n + j] = e4m3_trunc(xr[j] * inv);
    }
}
"""

_lib = load_c(name="fp8_trunc_fixture", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, n = x.shape
        q = torch.empty(rows, n, dtype=torch.uint8)
        scale = torch.empty(rows, 1)
        _lib.fp8_quant_trunc(x, q, scale, rows, n)
        return scale, q.view(torch.float8_e4m3fn)
