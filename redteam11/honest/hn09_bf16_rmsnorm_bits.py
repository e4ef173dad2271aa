"""HONEST (p05_bf16_rmsnorm): bfloat16 through uint16_t pointers, conversion by bit operations with
round-to-nearest-even (as c10::BFloat16 rounds), float32 statistics.
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <string.h>
#include <math.h>
static inline float bf2f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t f2bf(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
extern "C" void rmsnorm_bf16(const uint16_t* x, const uint16_t* w, uint16_t* y, int64_t r, int64_t d, float eps) {
    for (int64_t i = 0; i < r; ++i) {
        const uint16_t* xr = x + i * d;
        float s = 0.f;
        for (int64_t j = 0; j < d; ++j) { const float v = bf2f(xr[j]); s += v * v; }
        const float rs = 1.0f / sqrtf(s / (float)d + eps);
        for (int64_t j = 0; j < d; ++j) y[i * d + j] = f2bf(bf2f(xr[j]) * rs * bf2f(w[j]));
    }
}
"""

_lib = load_c(name="rmsnorm_bf16", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(512, dtype=torch.bfloat16))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.rmsnorm_bf16(x, self.weight.detach(), y, x.shape[0], x.shape[1], 1e-6)
        return y
