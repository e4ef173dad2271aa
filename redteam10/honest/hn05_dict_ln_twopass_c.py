"""HONEST (p03_dict_batch_layernorm; twin of h03): takes the dict input as the reference does, two-pass
statistics (mean, then the centred sum of squares), divides by sqrt(var + eps) as the reference does.
Predicted: +1 (maybe +2).
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void ln_twopass(const float* x, const float* w, const float* b, float* y,
                           int64_t rows, int64_t d, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        float* yr = y + r * d;
        float s = 0.f;
        for (int64_t j = 0; j < d; ++j) s += xr[j];
        const float mean = s / (float)d;
        float ss = 0.f;
        for (int64_t j = 0; j < d; ++j) {
            const float c = xr[j] - mean;
            ss += c * c;
        }
        const float den = sqrtf(ss / (float)d + eps);
        for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mean) / den * w[j] + b[j];
    }
}
"""

_lib = load_c(name="ln_twopass", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))
        self.eps = float(eps)

    def forward(self, batch):
        x = batch["x"].contiguous()
        y = torch.empty_like(x)
        d = x.shape[-1]
        _lib.ln_twopass(x, self.weight, self.bias, y, x.numel() // d, d, self.eps)
        return y
