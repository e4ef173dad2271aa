"""p8: MSE as a lean C function that returns its double result (4 independent double accumulators)."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" double mse(const float* __restrict__ x, const float* __restrict__ y, std::int64_t n) {
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    std::int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        double d0 = (double)x[i] - y[i], d1 = (double)x[i + 1] - y[i + 1];
        double d2 = (double)x[i + 2] - y[i + 2], d3 = (double)x[i + 3] - y[i + 3];
        a0 += d0 * d0; a1 += d1 * d1; a2 += d2 * d2; a3 += d3 * d3;
    }
    for (; i < n; ++i) { double d = (double)x[i] - y[i]; a0 += d * d; }
    return n ? (a0 + a1 + a2 + a3) / (double)n : 0.0;
}
"""
lib = load_c(name="hn15_mse", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return float(lib.mse(x.contiguous(), y.contiguous(), x.numel()))
