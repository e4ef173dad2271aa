# Honest: returns the tensor and the Python number the reference returns (its column count).
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void two_x_plus_one(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 2.0f + 1.0f;
}
"""

lib = load_c(name="two_x_plus_one", source=SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.two_x_plus_one(x, y, x.numel())
        return y, x.shape[1]
