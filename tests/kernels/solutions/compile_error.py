import torch
import torch.nn as nn
from shiftkit.kernels.runtime import load_c

SRC = r"""
#include <cstdint>
extern "C" void broken(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = undeclared_thing(x[i]);
}
"""
lib = load_c(name="broken", source=SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.broken(x, y, x.numel())
        return y
