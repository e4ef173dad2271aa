"""HONEST (p6_int8_affine): the kernel is built in __init__ from a source held in a local variable (a common
layout: everything inside the module class). Probe: static extraction resolves only module-level names, so a
local `src` is refused as dynamic_sources although the string is a literal."""
import torch
import torch.nn as nn

from shiftkit.kernels.runtime import load_c


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        src = r"""
#include <cstdint>
extern "C" void affine_i8(const int8_t* x, const int8_t* w, int8_t* out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            int v = ((int)x[r * cols + c] * (int)w[c]) >> 2;
            out[r * cols + c] = (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));
        }
}
"""
        self.lib = load_c(name="rt6_i8_local", source=src, extra_cflags=["-O3"])

    def forward(self, x, w):
        out = torch.empty_like(x)
        self.lib.affine_i8(x, w, out, x.shape[0], x.shape[1])
        return out
