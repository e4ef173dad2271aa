# HONEST: plain lean-C path (load_c, extern "C", scalar loop, libm expf), the most common simple style.
# Problem: p1_swish. Correct on the whole domain: x/(1+exp(-x)) gives -0 for x << 0 (exp overflows to inf),
# x for x >> 0, and is within 1-2 ulp of x*sigmoid(x) elsewhere.
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>

extern "C" void swish_f32(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = v / (1.0f + expf(-v));
    }
}
"""

lib = load_c(name="hn01_swish", source=SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.swish_f32(x, y, x.numel())
        return y
