"""HONEST (64-bit integer arithmetic): 3x + 7 in int64, right on the whole range."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void affine64(const int64_t* x, int64_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 3 + 7;
}
"""
lib = load_c(name="affine64", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.affine64(x.contiguous(), y, x.numel())
        return y
