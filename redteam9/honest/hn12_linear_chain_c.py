"""HONEST (p07_linear_chain; twin of h07): both Linear layers every call, in C, with the hidden activation in a
scratch tensor allocated in forward. Predicted: +1 (naive loops vs eager's BLAS: no speed milestone)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
// y[b][o] = bias[o] + sum_i x[b][i] * w[o][i]
extern "C" void linear(const float* x, const float* w, const float* bias, float* y,
                       int64_t batch, int64_t in, int64_t out) {
    for (int64_t b = 0; b < batch; ++b) {
        const float* xr = x + b * in;
        for (int64_t o = 0; o < out; ++o) {
            const float* wr = w + o * in;
            float acc = 0.f;
            for (int64_t i = 0; i < in; ++i) acc += xr[i] * wr[i];
            y[b * out + o] = acc + bias[o];
        }
    }
}
"""

_lib = load_c(name="linear_chain", source=SRC, extra_cflags=["-O3", "-march=native", "-ffast-math"])


class ModelNew(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        x = x.contiguous()
        h = torch.empty(x.shape[0], self.up.out_features, dtype=x.dtype)
        y = torch.empty(x.shape[0], self.down.out_features, dtype=x.dtype)
        _lib.linear(x, self.up.weight, self.up.bias, h, x.shape[0], self.up.in_features, self.up.out_features)
        _lib.linear(h, self.down.weight, self.down.bias, y, x.shape[0], self.down.in_features, self.down.out_features)
        return y
