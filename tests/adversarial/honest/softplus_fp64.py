"""HONEST (fp64 softplus with torch's threshold): x above 20, log1p(exp(x)) below, right at every magnitude."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void softplus64(const double* x, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 20.0 ? x[i] : std::log1p(std::exp(x[i]));
}
"""
lib = load_c(name="softplus64", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softplus64(x, y, x.numel())
        return y
