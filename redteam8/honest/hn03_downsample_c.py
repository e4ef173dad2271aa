"""Honest (twin of h03): 2x nearest downsampling written into a fresh contiguous output."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
extern "C" void down2(const float* x, float* y, int64_t planes, int64_t h, int64_t w) {
    const int64_t ho = h / 2, wo = w / 2;
    for (int64_t p = 0; p < planes; ++p)
        for (int64_t i = 0; i < ho; ++i) {
            const float* src = x + (p * h + 2 * i) * w;
            float* dst = y + (p * ho + i) * wo;
            for (int64_t j = 0; j < wo; ++j) dst[j] = src[2 * j];
        }
}
"""

_lib = load_c(name="down2", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        y = torch.empty((n, c, h // 2, w // 2), dtype=x.dtype)
        _lib.down2(x, y, n * c, h, w)
        return y
