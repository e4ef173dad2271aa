# HONEST: a plain C99 translation unit (sources={"gray.c": ...}: restrict, for-loop declarations, C's implicit
# conversions), integer I/O. Problem: p5_gray_int32.
# Full int32 domain with torch's semantics: products and sums wrap modulo 2^32 (computed in uint32, which is
# well defined in C), then an arithmetic right shift of the int32 result (floor division by 256, as torch's >>).
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c

C_SRC = r"""
#include <stdint.h>

void gray_i32(const int32_t *restrict r, const int32_t *restrict g, const int32_t *restrict b,
              int32_t *restrict out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        uint32_t s = (uint32_t)r[i] * 77u + (uint32_t)g[i] * 150u + (uint32_t)b[i] * 29u;
        out[i] = ((int32_t)s) >> 8;
    }
}
"""

lib = load_c(name="hn11_gray", sources={"gray.c": C_SRC}, extra_cflags=["-O3", "-std=c99"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, r, g, b):
        r, g, b = r.contiguous(), g.contiguous(), b.contiguous()
        out = torch.empty_like(r)
        lib.gray_i32(r, g, b, out, r.numel())
        return out
