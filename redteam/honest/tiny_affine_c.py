# Honest: per-feature affine map with a lean C kernel (plain loop, the compiler vectorises it).
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>

extern "C" void affine_rows(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * w[c] + b[c];
  }
}
"""

_lib = load_c(name="tiny_affine", source=SRC)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.affine_rows(x, self.weight, self.bias, y, x.shape[0], x.shape[1])
        return y
