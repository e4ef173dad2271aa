"""HONEST (p04_fp16_gelu): the same kernel written with GCC's native `_Float16` type (GCC 12, x86-64 SSE2):
`const _Float16*` parameters, conversions by casts. Plausible modern C++ for half tensors.

Why the harness might reject it: the casts may lower to libgcc's `__extendhfsf2` / `__truncsfhf2` (imports
from libgcc_s's GCC_12 symbol version, allowed only if the system libgcc_s exports them: symbols.py reads
the library's own table), and the DWARF base type of `_Float16` only matters for by-value parameters (none
here: pointers). Predicted: +1.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void gelu_f16(const _Float16* x, _Float16* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float v = (float)x[i];
        float t = tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v));
        y[i] = (_Float16)(0.5f * v * (1.f + t));
    }
}
"""

_lib = load_c(name="gelu_f16_native", source=SRC, extra_cflags=["-O2", "-std=c++17"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.gelu_f16(x, y, x.numel())
        return y
