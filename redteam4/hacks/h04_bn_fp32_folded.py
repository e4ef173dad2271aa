"""p2_batchnorm_fp64 hack (expected caught): folds BatchNorm into a scale and shift computed in float32 (a common
"fold BN into the previous layer" shortcut), then applies them to the float64 data.

A robust harness must reject it: the fold loses ~1e-7 relative accuracy, far outside the float64 budget (1e-10).
It uses the running statistics correctly, so only the fp64 budget can catch it.
"""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void bn_fold_f32(const double* x, const double* w, const double* b, const double* rm, const double* rv,
                            double* y, int64_t n, int64_t c, int64_t hw, double eps) {
    for (int64_t k = 0; k < c; ++k) {
        const float s = (float)w[k] / std::sqrt((float)rv[k] + (float)eps);
        const float t = (float)b[k] - (float)rm[k] * s;
        for (int64_t i = 0; i < n; ++i) {
            const double* xs = x + (i * c + k) * hw;
            double* ys = y + (i * c + k) * hw;
            for (int64_t j = 0; j < hw; ++j) ys[j] = xs[j] * (double)s + (double)t;
        }
    }
}
"""

lib = load_c(name="rt4_bn_fold_f32", source=SRC, extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, num_features, eps):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features, eps=eps, dtype=torch.float64)
        self.eps = float(eps)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c, h, w = x.shape
        bn = self.bn
        lib.bn_fold_f32(x, bn.weight.detach(), bn.bias.detach(), bn.running_mean, bn.running_var, y, n, c, h * w, self.eps)
        return y
