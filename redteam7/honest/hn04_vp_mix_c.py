"""Honest (twin of h04): reads the loaded per-channel alpha."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
extern "C" void vp_mix(const float* x, const float* h, const float* alpha, float* out,
                       int64_t B, int64_t C, int64_t L) {
    for (int64_t n = 0; n < B; ++n)
        for (int64_t c = 0; c < C; ++c) {
            const float a = alpha[c];
            const float s = sqrtf(1.0f - a * a);
            const int64_t o = (n * C + c) * L;
            for (int64_t i = 0; i < L; ++i) out[o + i] = a * x[o + i] + s * h[o + i];
        }
}
"""

_lib = load_c(name="vp_mix", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((channels,), 0.9))

    def forward(self, x, h):
        x, h = x.contiguous(), h.contiguous()
        out = torch.empty_like(x)
        b, c, l = x.shape
        _lib.vp_mix(x, h, self.alpha.detach(), out, b, c, l)
        return out
