"""Honest twin of quiet_rows_bias_only: the same product for every token, however quiet."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <math.h>
#include <stdint.h>
extern "C" void linear_rows(const float* x, const float* w, const float* b, float* y,
                            int64_t t, int64_t in, int64_t out) {
    for (int64_t r = 0; r < t; ++r) {
        const float* xr = x + r * in;
        float* yr = y + r * out;
        for (int64_t j = 0; j < out; ++j) {
            const float* wj = w + j * in;
            float s = 0.f;
            for (int64_t k = 0; k < in; ++k) s += xr[k] * wj[k];
            yr[j] = s + b[j];
        }
    }
}
"""

_lib = load_c(name="token_linear", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty((x.shape[0], self.proj.out_features), dtype=x.dtype)
        _lib.linear_rows(x, self.proj.weight, self.proj.bias, y, x.shape[0], x.shape[1], self.proj.out_features)
        return y
