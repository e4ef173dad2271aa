# HONEST: reduced-precision glue done in Python with blocker-allowed data movement: bf16 -> f32 with
# Tensor.copy_ into a float32 buffer, a lean float32 C kernel, f32 -> bf16 with copy_ (torch's RNE rounding).
# Problem: p8_softplus_bf16. Torch semantics (threshold 20, log1p(exp(x)) in float).
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>

extern "C" void softplus_f32(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = v > 20.0f ? v : log1pf(expf(v));
    }
}
"""

lib = load_c(name="hn17_softplus_f32", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        xf = torch.empty(x.shape, dtype=torch.float32)
        xf.copy_(x)
        yf = torch.empty_like(xf)
        lib.softplus_f32(xf, yf, xf.numel())
        y = torch.empty(x.shape, dtype=torch.bfloat16)
        y.copy_(yf)
        return y
