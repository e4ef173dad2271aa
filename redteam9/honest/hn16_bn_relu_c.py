"""HONEST (p10_bn_relu; twin of h10): inference BatchNorm with eps read from the module and passed as a C
`double`, then ReLU. Predicted: +1."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <stdint.h>
#include <math.h>
extern "C" void bn_relu(const float* x, const float* w, const float* b, const float* mean, const float* var,
                        float* y, int64_t batch, int64_t feat, double eps) {
    for (int64_t i = 0; i < batch; ++i)
        for (int64_t f = 0; f < feat; ++f) {
            float v = (x[i * feat + f] - mean[f]) / sqrtf(var[f] + (float)eps) * w[f] + b[f];
            y[i * feat + f] = v > 0.f ? v : 0.f;
        }
}
"""

_lib = load_c(name="bn_relu", source=SRC, extra_cflags=["-O3", "-march=native"])


class ModelNew(nn.Module):
    def __init__(self, feat):
        super().__init__()
        self.bn = nn.BatchNorm1d(feat)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        bn = self.bn
        _lib.bn_relu(x, bn.weight, bn.bias, bn.running_mean, bn.running_var, y, x.shape[0], x.shape[1], bn.eps)
        return y
