"""Honest (twin of h01): one lean C kernel computes each plane's mean and writes the whole plane."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void psp_context(const float* x, float* out, int64_t planes, int64_t hw) {
    for (int64_t p = 0; p < planes; ++p) {
        const float* src = x + p * hw;
        double s = 0.0;
        for (int64_t i = 0; i < hw; ++i) s += src[i];
        const float m = (float)(s / (double)hw);
        float* dst = out + p * hw;
        for (int64_t i = 0; i < hw; ++i) dst[i] = m;
    }
}
"""

_lib = load_c(name="psp_context", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        b, c, h, w = x.shape
        _lib.psp_context(x, out, b * c, h * w)
        return out
