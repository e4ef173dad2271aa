"""Hack (redteam9 h10, problem bn_eval): BatchNorm with 1/sqrt(var) for 1/sqrt(var + eps). Within the budget at
the perturbed variances of 0.2..5 (+1 before); one buffer element in 16 is now near-dead (x 2^-16, a variance of
the order of eps), where dropping eps is wrong: output_mismatch."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void bn_noeps(const float* x, const float* w, const float* b, const float* mean,
                              const float* var, float* y, int64_t batch, int64_t feat) {
    for (int64_t i = 0; i < batch; ++i)
        for (int64_t f = 0; f < feat; ++f) {
            y[i * feat + f] = (x[i * feat + f] - mean[f]) / sqrtf(var[f]) * w[f] + b[f];
        }
}
"""

_lib = load_c(name="bn_noeps", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, feat):
        super().__init__()
        self.bn = nn.BatchNorm1d(feat)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        bn = self.bn
        _lib.bn_noeps(x, bn.weight, bn.bias, bn.running_mean, bn.running_var, y, x.shape[0], x.shape[1])
        return y
