"""HONEST (false-positive classes of the Python scan): attributes named half, library and stream,
``self.modules()``, and try/finally without an except."""
import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void ssc(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = x[r * cols + c] * w[c] + b[c];
      y[r * cols + c] = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(features))
        self.bias = nn.Parameter(torch.empty(features))
        self.library = load_c(name="ssc_names", source=SRC)
        self.half = features // 2
        self.stream = None
        self.n_modules = sum(1 for _ in self.modules())

    def forward(self, x):
        y = torch.empty_like(x)
        try:
            self.library.ssc(x, self.weight, self.bias, y, x.shape[0], x.shape[1])
        finally:
            self.stream = None
        return y
