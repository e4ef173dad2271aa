"""HONEST (p05_bf16_rmsnorm): a C11 `.c` unit (sources dict, compiled as C), `_Alignas` stack buffer, a
`static inline` union pun, OpenMP over rows with the flag on both lines.
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
typedef union { float f; uint32_t u; } pun_t;
static inline float bf2f(uint16_t h) { pun_t p; p.u = (uint32_t)h << 16; return p.f; }
static inline uint16_t f2bf(float f) {
    pun_t p; p.f = f;
    if ((p.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((p.u >> 16) | 0x40);
    p.u += 0x7fffu + ((p.u >> 16) & 1u);
    return (uint16_t)(p.u >> 16);
}
void rms_c11(const uint16_t* restrict x, const uint16_t* restrict w, uint16_t* restrict y,
             int64_t r, int64_t d, float eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < r; ++i) {
        _Alignas(64) float buf[1024];
        const int64_t dd = d < 1024 ? d : 1024;
        float s = 0.f;
        for (int64_t j = 0; j < dd; ++j) { buf[j] = bf2f(x[i * d + j]); s += buf[j] * buf[j]; }
        for (int64_t j = dd; j < d; ++j) { const float v = bf2f(x[i * d + j]); s += v * v; }
        const float rs = 1.0f / sqrtf(s / (float)d + eps);
        for (int64_t j = 0; j < d; ++j) {
            const float v = j < dd ? buf[j] : bf2f(x[i * d + j]);
            y[i * d + j] = f2bf(v * rs * bf2f(w[j]));
        }
    }
}
"""

_lib = load_c(name="rms_c11", sources={"rms.c": SRC}, extra_cflags=["-O2", "-std=c11", "-fopenmp"],
              extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(512, dtype=torch.bfloat16))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.rms_c11(x, self.weight.detach(), y, x.shape[0], x.shape[1], 1e-6)
        return y
