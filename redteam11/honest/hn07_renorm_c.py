"""HONEST (p04_maxnorm_renorm_inplace; twin of h04): renorms x's rows in place (the reference's side effect)
and writes the gated tanh.
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void renorm_tanh(float* x, const float* gain, float* y, int64_t r, int64_t d, float max_norm) {
    for (int64_t i = 0; i < r; ++i) {
        float* xr = x + i * d;
        float* yr = y + i * d;
        double s = 0.0;
        for (int64_t j = 0; j < d; ++j) s += (double)xr[j] * xr[j];
        float sc = max_norm / ((float)sqrt(s) + 1e-7f);
        if (sc > 1.f) sc = 1.f;
        for (int64_t j = 0; j < d; ++j) {
            const float v = xr[j] * sc;
            xr[j] = v;
            yr[j] = tanhf(v) * gain[j];
        }
    }
}
"""

_lib = load_c(name="renorm_tanh", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(256))

    def forward(self, x):
        r, d = x.shape
        y = torch.empty_like(x)
        _lib.renorm_tanh(x, self.gain.detach(), y, r, d, 64.0)
        return y
