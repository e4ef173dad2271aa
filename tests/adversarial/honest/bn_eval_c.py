"""HONEST (reads its loaded buffers): eval-mode BatchNorm, y = (x - mean) / sqrt(var + eps) * w + b with the
running statistics and affine parameters the parent loaded."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void bn_eval(const float* x, const float* m, const float* v, const float* w, const float* b, float* y,
                        int64_t rows, int64_t f, double eps) {
  for (int64_t j = 0; j < f; ++j) {
    const double inv = 1.0 / std::sqrt((double)v[j] + eps);
    const float a = (float)(w[j] * inv), c = (float)(b[j] - (double)m[j] * w[j] * inv);
    for (int64_t r = 0; r < rows; ++r) y[r * f + j] = x[r * f + j] * a + c;
  }
}
"""
lib = load_c(name="bn_eval", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bn = nn.BatchNorm1d(features)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        bn = self.bn
        lib.bn_eval(x, bn.running_mean.contiguous(), bn.running_var.contiguous(), bn.weight.detach().contiguous(),
                    bn.bias.detach().contiguous(), y, x.shape[0], x.shape[1], bn.eps)
        return y
