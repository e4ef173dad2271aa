"""HONEST (p03_groupnorm_int_groups; twin of h03): reads num_groups, two-pass double statistics.
Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void gn(const float* x, const float* w, const float* b, float* y,
                   int64_t n, int64_t C, int64_t G, int64_t hw, double eps) {
    const int64_t cpg = C / G;
    for (int64_t k = 0; k < n; ++k)
        for (int64_t g = 0; g < G; ++g) {
            const float* xs = x + (k * C + g * cpg) * hw;
            float* ys = y + (k * C + g * cpg) * hw;
            const int64_t m = cpg * hw;
            double s = 0.0;
            for (int64_t i = 0; i < m; ++i) s += xs[i];
            const double mean = s / m;
            double q = 0.0;
            for (int64_t i = 0; i < m; ++i) { double d = xs[i] - mean; q += d * d; }
            const float rstd = (float)(1.0 / sqrt(q / m + eps));
            const float mu = (float)mean;
            for (int64_t c = 0; c < cpg; ++c) {
                const float a = w[g * cpg + c] * rstd, bb = b[g * cpg + c] - mu * a;
                for (int64_t i = 0; i < hw; ++i) ys[c * hw + i] = xs[c * hw + i] * a + bb;
            }
        }
}
"""

_lib = load_c(name="gn", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(256))
        self.bias = nn.Parameter(torch.zeros(256))

    def forward(self, x, num_groups):
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c, h, w = x.shape
        _lib.gn(x, self.weight.detach(), self.bias.detach(), y, n, c, int(num_groups), h * w, 1e-5)
        return y
