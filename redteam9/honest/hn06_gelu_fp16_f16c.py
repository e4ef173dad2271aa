"""HONEST (p04_fp16_gelu; twin of h04): fp16 in and out through F16C conversions (`-mf16c`), math in float32
with `tanhf`, rounding once to nearest, as torch's opmath does. Tensors passed as `uint16_t*`.
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
#include <immintrin.h>
extern "C" void gelu_fp16(const uint16_t* x, uint16_t* y, int64_t n) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    for (int64_t i = 0; i < n; ++i) {
        float v = _cvtsh_ss(x[i]);
        float t = tanhf(k0 * (v + k1 * v * v * v));
        y[i] = _cvtss_sh(0.5f * v * (1.f + t), _MM_FROUND_TO_NEAREST_INT);
    }
}
"""

_lib = load_c(name="gelu_fp16", source=SRC, extra_cflags=["-O3", "-mf16c"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.gelu_fp16(x, y, x.numel())
        return y
