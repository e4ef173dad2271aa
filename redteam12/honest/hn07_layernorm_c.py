"""HONEST (p06_layernorm_rows; twin of h06): two-pass LayerNorm per row (float sums over 768 columns, then
centred squares), gain and bias from the loaded weights.
Predicted: +1 (maybe +2)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void layernorm_rows(const float* x, const float* g, const float* b, float* y, int64_t rows, int64_t n,
                               float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        double s = 0.0;
        for (int64_t j = 0; j < n; ++j) s += xr[j];
        const float mean = (float)(s / (double)n);
        double v = 0.0;
        for (int64_t j = 0; j < n; ++j) { float d = xr[j] - mean; v += (double)d * d; }
        const float rstd = 1.0f / sqrtf((float)(v / (double)n) + eps);
        for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - mean) * rstd * g[j] + b[j];
    }
}
"""

_lib = load_c(name="layernorm_rows", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(768)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.layernorm_rows(x, self.ln.weight.detach(), self.ln.bias.detach(), y, x.shape[0], x.shape[1],
                            float(self.ln.eps))
        return y
