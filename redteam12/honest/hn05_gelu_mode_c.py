"""HONEST (p04_gelu_mode_arg; twin of h04): both modes of F.gelu, chosen per call from the string argument
(erf for "none", the tanh form for "tanh"), evaluated in double and stored as float.
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void gelu_mode(const float* x, float* y, int64_t n, int tanh_mode) {
    const double k0 = 0.7978845608028654;  /* sqrt(2/pi) */
    const double r2 = 0.7071067811865476;  /* 1/sqrt(2) */
    if (tanh_mode) {
        for (int64_t i = 0; i < n; ++i) {
            const double v = x[i];
            y[i] = (float)(0.5 * v * (1.0 + tanh(k0 * (v + 0.044715 * v * v * v))));
        }
    } else {
        for (int64_t i = 0; i < n; ++i) {
            const double v = x[i];
            y[i] = (float)(0.5 * v * (1.0 + erf(v * r2)));
        }
    }
}
"""

_lib = load_c(name="gelu_mode", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, approximate: str):
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.gelu_mode(x, y, x.numel(), 1 if approximate == "tanh" else 0)
        return y
