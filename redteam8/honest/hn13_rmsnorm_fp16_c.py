"""Honest control for hn12: the same fp16 RMSNorm kernel reading the fp16 gain itself (no torch op in forward)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
static inline float h2f(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, f;
    if (e == 0) {
        if (m == 0) f = s;
        else { e = 113; while (!(m & 0x400u)) { m <<= 1; --e; } m &= 0x3ffu; f = s | (e << 23) | (m << 13); }
    } else if (e == 31) f = s | 0x7f800000u | (m << 13);
    else f = s | ((e + 112) << 23) | (m << 13);
    float r; memcpy(&r, &f, 4); return r;
}
static inline uint16_t f2h(float v) {
    uint32_t x; memcpy(&x, &v, 4);
    const uint32_t sign = (x >> 16) & 0x8000u, ef = (x >> 23) & 0xffu;
    uint32_t mant = x & 0x7fffffu;
    const int32_t e = (int32_t)ef - 112;
    if (ef == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        const uint32_t sh = (uint32_t)(14 - e), half = 1u << (sh - 1), rem = mant & ((1u << sh) - 1);
        uint32_t hm = mant >> sh;
        if (rem > half || (rem == half && (hm & 1u))) ++hm;
        return (uint16_t)(sign | hm);
    }
    uint32_t h = sign | ((uint32_t)e << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return (uint16_t)h;
}
extern "C" void rmsnorm_h(const uint16_t* x, const uint16_t* w, uint16_t* y, int64_t rows, int64_t dim, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const uint16_t* xr = x + r * dim;
        double ss = 0.0;
        for (int64_t i = 0; i < dim; ++i) { const float v = h2f(xr[i]); ss += (double)v * v; }
        const float inv = 1.0f / sqrtf((float)(ss / (double)dim) + eps);
        for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = f2h(h2f(w[i]) * h2f(f2h(h2f(xr[i]) * inv)));
    }
}
"""

_lib = load_c(name="rmsnorm_h", source=SRC, extra_cflags=["-O3"])
EPS = 1e-6


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=torch.float16))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.rmsnorm_h(x, self.weight, y, x.numel() // x.shape[-1], x.shape[-1], EPS)
        return y
