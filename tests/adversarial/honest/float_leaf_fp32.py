"""HONEST (a Python-float leaf as accurate as the reference's): the mean is accumulated in double, so it
differs from torch's float32 mean by float32 rounding only, far more than the float64 budget allows."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void twice_and_mean(const float* x, float* y, double* mean, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) { y[i] = 2.f * x[i]; acc += x[i]; }
  mean[0] = acc / (double)n;
}
"""
lib = load_c(name="twice_mean", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        m = torch.empty(1, dtype=torch.float64)
        lib.twice_and_mean(x.contiguous(), y, m, x.numel())
        return y, m.item()
